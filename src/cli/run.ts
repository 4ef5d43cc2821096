// Runs the CLI from source (`node --import tsx src/cli/run.ts ...`), e.g. to spawn it in tests.
import { main } from "./main.js";

await main(process.argv.slice(2));
