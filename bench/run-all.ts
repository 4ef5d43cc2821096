// `npm run bench`: runs every bench/*.bench.ts in sequence, each in a fresh process so heaps do not mix.
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";

const dir = fileURLToPath(new URL(".", import.meta.url));
const scripts = readdirSync(dir)
  .filter((f) => f.endsWith(".bench.ts"))
  .sort();
let failed = 0;
for (const [i, script] of scripts.entries()) {
  process.stderr.write(`bench: ${i + 1}/${scripts.length} ${script}\n`);
  process.stdout.write(`\n# ${script}\n`);
  const run = spawnSync(process.execPath, ["--import", "tsx", fileURLToPath(new URL(script, import.meta.url))], { stdio: "inherit" });
  if (run.status !== 0) failed++;
}
process.exitCode = failed === 0 ? 0 : 1;
