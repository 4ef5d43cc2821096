// Source entry of the CLI for development and tests: `node --import tsx src/cli/run.ts <command> ...`.
import { main } from "./main.js";

await main(process.argv.slice(2));
