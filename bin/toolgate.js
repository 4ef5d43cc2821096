#!/usr/bin/env node
// Thin launcher: the CLI itself is compiled to dist/ by `npm install` (prepare) or `npm run build`.
import("../dist/cli/main.js").then((cli) => cli.main(process.argv.slice(2)));
