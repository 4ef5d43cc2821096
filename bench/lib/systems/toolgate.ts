/**
 * toolgate as one of the compared systems, from a given source tree: its own nats-server (-m), the
 * gateway as `toolgate serve` from the tree's `dist/`, the executors (4 ToolRunners or 4
 * protocol-level executors, 32 claims each) in one process, the producer in another.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startBenchNats } from "../bench-nats.js";
import { freePort, spawnBenchChild, waitForLine, type BenchChild } from "../child.js";
import { importFromTree, type ToolgateTree } from "../toolgate-tree.js";
import { CONCURRENCY_EACH, WORKERS } from "../workload.js";
import { producerLevels, type BenchSystem } from "./system.js";

export type ExecutorKind = "protocol" | "runner";

const API_KEY = "bench-admin-key-0123456789abcdef";
const EXECUTOR_NAMES: Record<ExecutorKind, string> = { protocol: "protocol executors", runner: "ToolRunner" };

export async function startToolgate(tree: ToolgateTree, executor: ExecutorKind, dir: string, log: (line: string) => void): Promise<BenchSystem> {
  const id = `toolgate-${executor}${tree.label}`;
  mkdirSync(dir, { recursive: true });
  const nats = await startBenchNats(join(dir, "nats"));
  const children: BenchChild[] = [];
  try {
    const { PERMISSIONS } = await importFromTree<{ PERMISSIONS: readonly string[] }>(tree, "http/identities.js");
    // The names are in streams/names; a baseline from before has the buckets in kv/ or, older, in execution/.
    type Buckets = { EXECUTION_BUCKETS: { projections: string; assignments: string } };
    const { EXECUTION_BUCKETS } = await importFromTree<Buckets>(tree, "streams/names.js")
      .catch(() => importFromTree<Buckets>(tree, "kv/buckets.js"))
      .catch(() => importFromTree<Buckets>(tree, "execution/buckets.js"));
    const port = await freePort();
    const gatewayUrl = `http://127.0.0.1:${port}`;
    const gatewayLog = process.env.BENCH_GATEWAY_LOG ?? "info";
    log(`${id}: gateway (toolgate serve, LOG_LEVEL=${gatewayLog}) on ${gatewayUrl}, nats-server ${nats.server.url}; logs in ${dir}`);
    const gateway = spawnBenchChild(
      `${id}-gateway`,
      join(tree.root, "bin/toolgate.js"),
      ["serve"],
      {
        NATS_URL: nats.server.url,
        TOOLGATE_HTTP_PORT: String(port),
        TOOLGATE_DATA_DIR: join(dir, "gateway"),
        TOOLGATE_IDENTITIES: JSON.stringify([{ name: "bench", key: API_KEY, agents: "*", permissions: [...PERMISSIONS] }]),
        LOG_LEVEL: gatewayLog,
        // One identity drives every call here: its per-identity limit would cap the measurement itself.
        TOOLGATE_RATE_LIMIT_RPS: "1000000",
        TOOLGATE_RATE_LIMIT_BURST: "1000000",
      },
      join(dir, "gateway.log"),
      { tsx: false, cwd: tree.root },
    );
    children.push(gateway);
    // The producer waits for the gateway's readiness and seeds the tool before it says `ready`.
    const producer = spawnBenchChild(
      `${id}-producer`,
      fileURLToPath(new URL("./toolgate-producer.ts", import.meta.url)),
      [],
      {
        NATS_URL: nats.server.url,
        BENCH_GATEWAY_URL: gatewayUrl,
        BENCH_API_KEY: API_KEY,
        BENCH_PROJECTIONS_BUCKET: EXECUTION_BUCKETS.projections,
        BENCH_ASSIGNMENTS_BUCKET: EXECUTION_BUCKETS.assignments,
      },
      join(dir, "producer.log"),
    );
    children.push(producer);
    await waitForLine(producer, "ready");
    const executors = spawnBenchChild(
      `${id}-executors`,
      join(tree.root, "bench/lib/e2e-executor.ts"),
      [],
      { NATS_URL: nats.server.url, BENCH_EXECUTOR: executor, BENCH_EXECUTORS: String(WORKERS), BENCH_MAX_CONCURRENT: String(CONCURRENCY_EACH), BENCH_DIR: dir },
      join(dir, "executors.log"),
      { cwd: tree.root },
    );
    children.push(executors);
    await waitForLine(executors, "ready");
    return {
      id,
      name: `toolgate${tree.label}, ${EXECUTOR_NAMES[executor]}`,
      messageUnit: "NATS messages",
      pids: new Map([
        ["gateway", gateway.child.pid!],
        ["executors", executors.child.pid!],
        ["nats-server", nats.server.child.pid!],
        ["producer", producer.child.pid!],
      ]),
      ...producerLevels(producer),
      snapshot: () => nats.snapshot(),
      async stop() {
        // Executors first (they hold claims), the gateway last: as a deployment drains.
        for (const c of [executors, producer, gateway]) await c.stop();
        await nats.stop();
      },
    };
  } catch (err) {
    for (const c of children.reverse()) await c.stop();
    await nats.stop();
    throw err;
  }
}
