/**
 * Summarises a V8 `.cpuprofile` (from `node --cpu-prof`, e.g. `BENCH_PROFILE=<dir> npm run bench:e2e`):
 * the functions with the most self time, and the share of time under each source area (inclusive).
 *
 *   npx tsx bench/profile-summary.ts <file.cpuprofile> [top=25]
 *
 * A profiled process writes one file per thread; the largest is its main thread.
 */
import { readFileSync } from "node:fs";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const args = process.argv.slice(2);
const [file, topArg, ...rest] = args;
// `--cpu-prof` writes one file per thread: name the one to read (the largest is the main thread).
if (!file?.endsWith(".cpuprofile") || rest.length > 0 || (topArg !== undefined && !/^\d+$/.test(topArg)))
  throw new Error(`usage: profile-summary <file.cpuprofile> [top]; got: ${args.join(" ") || "nothing"}`);
const profile = JSON.parse(readFileSync(file, "utf8")) as Profile;
const top = Number(topArg ?? 25);

const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const selfUs = new Map<number, number>();
profile.samples.forEach((id, i) => selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
const totalUs = [...selfUs.values()].reduce((a, b) => a + b, 0);

/** Where a frame lives: a package, a project directory, node internals, or the VM itself. */
function area(url: string): string {
  if (!url) return "(vm: gc, idle, program)";
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1]!;
  const own = /\/(src|dist|bench|test)\/([^/]+)\/?[^/]*$/.exec(url);
  if (own) return `${own[1]}/${own[2]}`;
  return url.startsWith("node:") ? "node internals" : url;
}
const label = (n: ProfileNode) =>
  `${n.callFrame.functionName || "(anonymous)"} ${area(n.callFrame.url)}${n.callFrame.url ? `:${n.callFrame.lineNumber + 1}` : ""}`;

const self = new Map<string, number>();
const inclusive = new Map<string, number>();
for (const [id, us] of selfUs) {
  const node = byId.get(id)!;
  self.set(label(node), (self.get(label(node)) ?? 0) + us);
  // Each area once per sample, however deep it recurs.
  const seen = new Set<string>();
  for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) seen.add(area(byId.get(at)!.callFrame.url));
  for (const a of seen) inclusive.set(a, (inclusive.get(a) ?? 0) + us);
}

const pct = (us: number) => `${((us / totalUs) * 100).toFixed(1).padStart(5)}%`;
console.log(`${file}: ${(totalUs / 1e6).toFixed(2)} s sampled`);
console.log(`\ntop ${top} by self time`);
for (const [name, us] of [...self].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${pct(us)}  ${name}`);
console.log("\nby area (inclusive: time with a frame of the area on the stack)");
for (const [name, us] of [...inclusive].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${pct(us)}  ${name}`);
