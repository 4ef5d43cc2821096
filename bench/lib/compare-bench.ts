/**
 * The entry of a comparison bench (`bench:e2e`, `bench:peers`): reads the environment, builds the
 * toolgate trees, runs the systems side by side, prints progress on stderr, the markdown report on
 * stdout and writes the JSON results to bench/results/ (git-ignored).
 *
 * Environment: BENCH_SYSTEMS (ids, see bench/lib/systems/registry.ts); BENCH_LEVELS=1,10,100 (calls
 * in flight); BENCH_SECONDS=5 (each level); BENCH_ROUNDS=1 (passes over the levels, the report
 * shows medians); BENCH_WARMUP_SECONDS=2; BENCH_RATE=<calls/s> (every level paced to that many call
 * starts a second: CPU per call compared at one load, see `LevelCommand`); BENCH_BASELINE_REF=<git ref>
 * (toolgate from that ref too, alternated with this tree); BENCH_SKIP_BUILD=1 (this tree's dist/ is
 * current); BENCH_GATEWAY_LOG (the gateway's LOG_LEVEL, default info); BENCH_PROFILE=<dir> (children
 * under --cpu-prof); BENCH_NATS_PPROF=<port> (the nats-servers serve pprof from that port on);
 * BENCH_KEEP=1 (keep logs, stores and the baseline worktree; logs and stores are kept anyway when a level failed); TOOLGATE_NATS_SERVER
 * (the nats-server binary, else NATS_SERVER_BIN, else PATH); BENCH_REDIS_PORT (default 6379).
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { availableParallelism, cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { benchNatsBinary } from "./bench-nats.js";
import { compareSystems } from "./compare.js";
import { markdownReport } from "./compare-report.js";
import { runsToolgate, systemFactories, systemIdsFromEnv, type SystemId } from "./systems/registry.js";
import { buildTree, checkoutBaseline, currentTree, type ToolgateTree } from "./toolgate-tree.js";

/** What every numeric setting of a bench must be (NaN and Infinity are not). */
const isPositiveFinite = (v: number) => v > 0 && Number.isFinite(v);

const positiveNumbers = (name: string, fallback: string): number[] => {
  const values = (process.env[name] ?? fallback).split(",").map(Number);
  if (!values.every(isPositiveFinite)) throw new Error(`${name}=${process.env[name]}: positive numbers, comma-separated (e.g. ${fallback})`);
  return values;
};

/** One positive, finite number, or undefined when `name` is unset. */
const optionalPositiveNumber = (name: string, what: string): number | undefined => {
  const text = process.env[name];
  if (text === undefined || text === "") return undefined;
  const value = Number(text);
  if (!isPositiveFinite(value)) throw new Error(`${name}=${text}: one positive number, ${what}`);
  return value;
};

export interface CompareBenchOptions {
  bench: string;
  defaults: readonly SystemId[];
  /** Lines printed before the tables (e.g. the JetStream ceiling as context), measured before the systems start. */
  context?: (log: (line: string) => void) => Promise<string[]>;
}

export async function runCompareBench(options: CompareBenchOptions): Promise<void> {
  const log = (line: string) => process.stderr.write(`bench:${options.bench}: ${line}\n`);
  const root = fileURLToPath(new URL("../..", import.meta.url));
  const ids = systemIdsFromEnv(options.defaults);
  const levels = positiveNumbers("BENCH_LEVELS", "1,10,100");
  const [seconds] = positiveNumbers("BENCH_SECONDS", "5");
  const [warmupSeconds] = positiveNumbers("BENCH_WARMUP_SECONDS", "2");
  const [rounds] = positiveNumbers("BENCH_ROUNDS", "1");
  const rate = optionalPositiveNumber("BENCH_RATE", "the call starts a second every level is paced to (e.g. 300); unset for a closed loop");
  const startedAt = new Date();
  const loadBefore = loadavg();

  const trees: ToolgateTree[] = [];
  const dir = mkdtempSync(join(tmpdir(), `toolgate-bench-${options.bench}-`));
  let keepLogs = Boolean(process.env.BENCH_KEEP);
  try {
    const usesToolgate = ids.some(runsToolgate);
    if (usesToolgate && process.env.BENCH_BASELINE_REF) trees.push(checkoutBaseline(root, process.env.BENCH_BASELINE_REF, log));
    trees.push(currentTree(root));
    if (usesToolgate) for (const tree of trees) if (tree.label !== "" || !process.env.BENCH_SKIP_BUILD) buildTree(tree, log);
    const context = options.context ? await options.context(log) : [];
    const load = rate ? `paced to ${rate} calls/s` : "closed loop";
    log(`systems: ${ids.join(", ")}; levels ${levels.join(", ")} in flight, ${load}, ${seconds} s each; logs in ${dir}`);
    const comparison = await compareSystems({
      factories: systemFactories(ids, trees, dir, log),
      levels,
      seconds: seconds!,
      rounds: Math.round(rounds!),
      warmupSeconds: warmupSeconds!,
      rate,
      log,
    });
    const loadAfter = loadavg();

    const natsVersion = execFileSync(benchNatsBinary(), ["--version"], { encoding: "utf8" }).trim();
    const header = [
      `bench:${options.bench}, ${startedAt.toISOString().slice(0, 16).replace("T", " ")} UTC: ${availableParallelism()} cores (${cpus()[0]?.model ?? "cpu"}), node ${process.version}, ${natsVersion}, file storage R1`,
      `toolgate trees: ${trees.map((t) => `${t.label || "this tree"} ${t.commit}`).join(", ")}; ${load}, ${levels.join(" / ")} in flight, ${seconds} s a level${rounds! > 1 ? `, ${rounds} rounds` : ""}, levels alternated across systems`,
      `load average (1 min) before / after: ${loadBefore[0]!.toFixed(2)} / ${loadAfter[0]!.toFixed(2)}`,
    ];
    console.log([...header, "", ...context, ...(context.length > 0 ? [""] : []), markdownReport(comparison, availableParallelism(), rate)].join("\n"));

    const resultsDir = join(root, "bench/results");
    mkdirSync(resultsDir, { recursive: true });
    const file = join(resultsDir, `${options.bench}-${startedAt.toISOString().replace(/[:.]/g, "-")}.json`);
    const meta = {
      bench: options.bench,
      startedAt,
      cores: availableParallelism(),
      cpu: cpus()[0]?.model,
      node: process.version,
      natsServer: natsVersion,
      trees: trees.map((t) => ({ label: t.label, commit: t.commit })),
      levels,
      seconds,
      rounds,
      rate,
      loadBefore,
      loadAfter,
      context,
    };
    writeFileSync(file, `${JSON.stringify({ meta, ...comparison }, null, 2)}\n`);
    log(`results: ${file}`);
    if (comparison.skipped.length > 0 || comparison.results.some((r) => r.error)) {
      process.exitCode = 1;
      // What the processes logged is all there is to tell why a level failed.
      keepLogs = true;
    }
  } finally {
    for (const tree of trees) tree.remove();
    if (keepLogs) log(`logs kept in ${dir}`);
    else rmSync(dir, { recursive: true, force: true });
  }
}
