/**
 * `npm run bench:e2e`: full tool calls through toolgate (create over HTTP -> claim -> grant ->
 * accepted, confirmed -> one progress -> completed -> projection stored) at 1, 10 and 100 calls in
 * flight, beside the JetStream ceiling measured in the same run. Progress on stderr, tables on stdout.
 *
 * Processes: this driver (HTTP client and completion watch), the gateway as `toolgate serve` in a
 * child process, the executors in another child (bench/lib/e2e-executor.ts), and nats-server. Each
 * has its own event loop, as in a deployment, and none inflates another's latency or profile.
 *
 * Environment: BENCH_EXECUTOR=runner,protocol (which executors, in order); BENCH_SCALE (multiplies
 * the number of calls per level); BENCH_PROFILE=<dir> (the gateway and executors run under --cpu-prof);
 * BENCH_GATEWAY_LOG (the gateway's LOG_LEVEL, default info as `toolgate serve`); BENCH_LEVELS=1,10,100
 * (the levels to run, all by default).
 */
import { Agent, request } from "node:http";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { availableParallelism, cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { connect } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { Kvm, KvWatchInclude } from "@nats-io/kv";
import { PERMISSIONS } from "../src/http/identities.js";
import { startNatsServer } from "../src/nats/nats-server-process.js";
import { EXECUTION_BUCKETS } from "../src/kv/buckets.js";
import { trafficBetween, trafficSnapshot, type TrafficByRole } from "./lib/nats-traffic.js";
import { freePort, processCpuMs, processSyscalls, spawnBenchChild, waitForLine, type BenchChild } from "./lib/child.js";
import { measureJetStreamCeiling } from "./lib/jetstream-ceiling.js";
import { BENCH_ARGUMENTS, BENCH_TOOL, protocolMessageSizes } from "./lib/protocol-messages.js";
import { formatRate, percentile, runConcurrently } from "./lib/stats.js";
import { settledSeqs, writesBetween } from "./lib/stream-writes.js";

const ALL_LEVELS = [1, 10, 100] as const;
/** BENCH_LEVELS=100 (say) runs only those levels: a profile of one load. */
const LEVELS = process.env.BENCH_LEVELS ? ALL_LEVELS.filter((l) => process.env.BENCH_LEVELS!.split(",").includes(String(l))) : ALL_LEVELS;
const SCALE = Number(process.env.BENCH_SCALE ?? 1);
const CALLS: Record<(typeof ALL_LEVELS)[number], number> = { 1: Math.round(300 * SCALE), 10: Math.round(1_000 * SCALE), 100: Math.round(2_000 * SCALE) };
/** Tool calls per run: an agent turn makes a few; a run's record lists its calls, so it is not grown without bound. */
const CALLS_PER_RUN = 10;
const EXECUTOR_KINDS = (process.env.BENCH_EXECUTOR ?? "runner,protocol").split(",") as Array<"runner" | "protocol">;
/** Executors and claims each: room for the 100-call level. */
const EXECUTORS = 4;
const MAX_CONCURRENT = 32;
const API_KEY = "bench-admin-key-0123456789abcdef";
const CALL_TIMEOUT_MS = 30_000;

const log = (line: string) => process.stderr.write(`bench:e2e: ${line}\n`);
const root = fileURLToPath(new URL("..", import.meta.url));

// --- HTTP client: keep-alive sockets, so a call costs one request, not a TCP handshake.

const agent = new Agent({ keepAlive: true, maxSockets: 256 });
let baseUrl = "";

function api<T = any>(method: "GET" | "POST", path: string, body?: unknown): Promise<T> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      baseUrl + path,
      { method, agent, headers: { authorization: `Bearer ${API_KEY}`, ...(payload ? { "content-type": "application/json", "content-length": Buffer.byteLength(payload) } : {}) } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          if ((res.statusCode ?? 500) >= 300) reject(new Error(`${method} ${path}: HTTP ${res.statusCode} ${text}`));
          else resolve(text ? JSON.parse(text) : undefined);
        });
      },
    );
    req.on("error", reject);
    req.end(payload);
  });
}

async function untilReady(timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if ((await api<{ ready: boolean }>("GET", "/readyz")).ready) return;
    } catch (err) {
      if (Date.now() > deadline) throw err;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Binding, toolset, agent version and session of the bench tool; returns the session id. */
async function seed(): Promise<string> {
  await api("POST", "/v1/bindings", { binding_id: BENCH_TOOL.bindingId, executor_scope: BENCH_TOOL.scope, tool_kind: "read" });
  const toolset = `${BENCH_TOOL.agent}-tools`;
  await api("POST", `/v1/toolsets/${toolset}/versions`, {
    version: "v1",
    tools: [
      {
        name: BENCH_TOOL.name,
        description: "Read tasks, a page at a time",
        binding_id: BENCH_TOOL.bindingId,
        input_schema: { type: "object", properties: { cursor: { type: "string" }, filter: { type: "object" }, limit: { type: "integer" } } },
        output_schema: { type: "object" },
        max_result_context_bytes: 16_384,
      },
    ],
  });
  const version = await api("POST", `/v1/agents/${BENCH_TOOL.agent}/versions`, { toolset, toolset_version: "v1", max_context_tokens: 100_000 });
  return (await api("POST", "/v1/sessions", { agent_version: version.agent_version, subject: "user-42" })).session_id;
}

// --- Completion: a call is done when its projection is stored (what the run's history then shows).

/**
 * Watches the projections bucket: one push subscription, no polling, so observing adds no request to
 * the gateway and no write to JetStream. A projection can land before the HTTP answer that
 * created its call, so early ones are remembered.
 */
class CompletionWatch {
  private readonly seen = new Map<string, number>();
  private readonly waiters = new Map<string, (at: number) => void>();

  static async open(natsUrl: string): Promise<CompletionWatch & { close(): Promise<void> }> {
    const nc = await connect({ servers: natsUrl, name: "bench-completion-watch" });
    const kv = await new Kvm(nc).open(EXECUTION_BUCKETS.projections);
    const entries = await kv.watch({ include: KvWatchInclude.UpdatesOnly });
    const watch = new CompletionWatch();
    void (async () => {
      for await (const e of entries) if (e.operation === "PUT") watch.arrived(e.key, performance.now());
    })();
    return Object.assign(watch, {
      async close() {
        entries.stop();
        await nc.close();
      },
    });
  }

  private arrived(assignmentId: string, at: number): void {
    const waiter = this.waiters.get(assignmentId);
    if (!waiter) return void this.seen.set(assignmentId, at);
    this.waiters.delete(assignmentId);
    waiter(at);
  }

  /** When the projection of `assignmentId` was stored (performance.now() of its arrival here). */
  done(assignmentId: string): Promise<number> {
    const at = this.seen.get(assignmentId);
    if (at !== undefined) {
      this.seen.delete(assignmentId);
      return Promise.resolve(at);
    }
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no projection for ${assignmentId} within ${CALL_TIMEOUT_MS} ms`)), CALL_TIMEOUT_MS);
      this.waiters.set(assignmentId, (t) => {
        clearTimeout(timer);
        resolve(t);
      });
    });
  }
}

// --- One level: `concurrency` closed-loop callers, each making its calls one after the other.

/** The processes of a call, each measured from `/proc`. */
const PROCESSES = ["gateway", "executors", "nats-server", "driver"] as const;
type PerProcess = Record<(typeof PROCESSES)[number], number>;

interface LevelResult {
  executor: string;
  concurrency: number;
  calls: number;
  callsPerSec: number;
  p50: number;
  p95: number;
  p99: number;
  writes: Map<string, number>;
  writesPerCall: number;
  /** CPU time per call of each process (less noisy than wall time). */
  cpuMs: PerProcess;
  /** Read and write system calls per call of each process. */
  syscalls: PerProcess;
  /** NATS messages per call, by kind of client, as nats-server counted them. */
  traffic: TrafficByRole;
}

interface LevelContext {
  sessionId: string;
  watch: CompletionWatch;
  jsm: Awaited<ReturnType<typeof jetstreamManager>>;
  gateway: BenchChild;
  executors: BenchChild;
  natsPid: number;
  natsMonitorUrl: string;
}

async function runLevel(executor: string, concurrency: number, calls: number, ctx: LevelContext): Promise<LevelResult> {
  // Runs are made beforehand: their creation is not part of a tool call, nor are its writes.
  const runs: string[] = [];
  await runConcurrently(Math.ceil(calls / CALLS_PER_RUN) + concurrency, 10, async () => {
    runs.push((await api("POST", `/v1/sessions/${ctx.sessionId}/runs`)).run_id);
  });
  const before = await settledSeqs(ctx.jsm);
  const usage = () => ({
    cpuMs: { gateway: ctx.gateway.cpuMs(), executors: ctx.executors.cpuMs(), "nats-server": processCpuMs(ctx.natsPid), driver: processCpuMs(process.pid) },
    syscalls: { gateway: ctx.gateway.syscalls(), executors: ctx.executors.syscalls(), "nats-server": processSyscalls(ctx.natsPid), driver: processSyscalls(process.pid) },
  });
  const usageBefore = usage();
  const trafficBefore = await trafficSnapshot(ctx.natsMonitorUrl);
  const latencies: number[] = [];
  let remaining = calls;
  const caller = async (): Promise<void> => {
    let run = "";
    let used = CALLS_PER_RUN;
    while (remaining > 0) {
      remaining--;
      if (used === CALLS_PER_RUN) [run, used] = [runs.pop()!, 0];
      used++;
      const start = performance.now();
      const created = await api("POST", `/v1/runs/${run}/tool-calls`, { tool_name: BENCH_TOOL.name, arguments: BENCH_ARGUMENTS });
      latencies.push((await ctx.watch.done(created.assignment.assignment_id)) - start);
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: concurrency }, caller));
  const elapsedMs = performance.now() - started;
  const writes = writesBetween(before, await settledSeqs(ctx.jsm));
  const usageAfter = usage();
  const traffic = trafficBetween(trafficBefore, await trafficSnapshot(ctx.natsMonitorUrl));
  const perCall = (key: "cpuMs" | "syscalls") => Object.fromEntries(PROCESSES.map((p) => [p, (usageAfter[key][p] - usageBefore[key][p]) / calls])) as PerProcess;
  const total = [...writes.values()].reduce((a, b) => a + b, 0);
  latencies.sort((a, b) => a - b);
  return {
    executor,
    concurrency,
    calls,
    callsPerSec: (calls / elapsedMs) * 1000,
    p50: percentile(latencies, 50),
    p95: percentile(latencies, 95),
    p99: percentile(latencies, 99),
    writes,
    writesPerCall: total / calls,
    cpuMs: perCall("cpuMs"),
    syscalls: perCall("syscalls"),
    traffic,
  };
}

// --- main

const sizes = protocolMessageSizes();
const messageBytes = Math.round(Object.values(sizes).reduce((a, b) => a + b, 0) / Object.values(sizes).length);
log(`JetStream ceiling at ${messageBytes} B (mean msgpack size of candidate, grant, accepted, progress, completed)`);
const ceiling = await measureJetStreamCeiling({ messageBytes, log });

const dir = mkdtempSync(join(tmpdir(), "toolgate-bench-e2e-"));
if (process.env.BENCH_PROFILE) mkdirSync(process.env.BENCH_PROFILE, { recursive: true });
const natsMonitorPort = await freePort();
const nats = await startNatsServer({ storeDir: join(dir, "nats"), args: ["-m", String(natsMonitorPort)] });
const children: BenchChild[] = [];
const results: LevelResult[] = [];
try {
  const port = await freePort();
  baseUrl = `http://127.0.0.1:${port}`;
  const gatewayLog = process.env.BENCH_GATEWAY_LOG ?? "info";
  log(`gateway: toolgate serve on ${baseUrl} (LOG_LEVEL=${gatewayLog}); logs in ${dir}`);
  const gateway = spawnBenchChild(
    "gateway",
    join(root, "src/cli/run.ts"),
    ["serve"],
    {
      NATS_URL: nats.url,
      TOOLGATE_HTTP_PORT: String(port),
      TOOLGATE_DATA_DIR: join(dir, "gateway"),
      TOOLGATE_IDENTITIES: JSON.stringify([{ name: "bench", key: API_KEY, agents: "*", permissions: [...PERMISSIONS] }]),
      LOG_LEVEL: gatewayLog,
      // One identity drives every call here: its per-identity limit would cap the measurement itself.
      TOOLGATE_RATE_LIMIT_RPS: "1000000",
      TOOLGATE_RATE_LIMIT_BURST: "1000000",
    },
    join(dir, "gateway.log"),
  );
  children.push(gateway);
  await untilReady();
  const sessionId = await seed();
  const nc = await connect({ servers: nats.url, name: "bench-driver" });
  const jsm = await jetstreamManager(nc);
  const watch = await CompletionWatch.open(nats.url);

  for (const executor of EXECUTOR_KINDS) {
    log(`executors: ${EXECUTORS} x ${executor}, ${MAX_CONCURRENT} claims each`);
    const storeDir = mkdtempSync(join(dir, `${executor}-`));
    const exec = spawnBenchChild(
      `executor-${executor}`,
      join(root, "bench/lib/e2e-executor.ts"),
      [],
      { NATS_URL: nats.url, BENCH_EXECUTOR: executor, BENCH_EXECUTORS: String(EXECUTORS), BENCH_MAX_CONCURRENT: String(MAX_CONCURRENT), BENCH_DIR: storeDir },
      join(dir, `executor-${executor}.log`),
    );
    children.push(exec);
    await waitForLine(exec, "ready");
    log("warm-up: 200 calls, 10 in flight");
    const ctx: LevelContext = { sessionId, watch, jsm, gateway, executors: exec, natsPid: nats.child.pid!, natsMonitorUrl: `http://127.0.0.1:${natsMonitorPort}` };
    await runLevel(executor, 10, 200, ctx);
    for (const concurrency of LEVELS) {
      log(`${executor}: ${CALLS[concurrency]} calls, ${concurrency} in flight`);
      const r = await runLevel(executor, concurrency, CALLS[concurrency], ctx);
      log(`  ${formatRate(r.callsPerSec)}, p50 ${r.p50.toFixed(2)} ms, p99 ${r.p99.toFixed(2)} ms, ${r.writesPerCall.toFixed(2)} writes/call`);
      results.push(r);
    }
    await exec.stop();
    children.splice(children.indexOf(exec), 1);
  }
  await watch.close();
  await nc.close();
} finally {
  for (const c of children.reverse()) await c.stop();
  await nats.stop();
  agent.destroy();
  if (!process.env.BENCH_KEEP) rmSync(dir, { recursive: true, force: true });
}
// Measured again once the calls are done: the ratio is taken against the mean of the two, so a drift
// of this shared machine during the run weighs on both sides of it.
log("JetStream ceiling again, after the tool calls");
const ceilingAfter = await measureJetStreamCeiling({ messageBytes, log });
const batchedCeiling = (ceiling.batchedPublishPerSec + ceilingAfter.batchedPublishPerSec) / 2;

// --- report

const perCallCeiling = (r: LevelResult) => batchedCeiling / r.writesPerCall;
const ms = (v: number) => v.toFixed(2);
console.log(`bench:e2e on ${availableParallelism()} cores (${cpus()[0]?.model ?? "cpu"}), node ${process.version}, nats-server ${ceiling.serverVersion} (file storage, R1)`);
console.log(
  `JetStream ceiling, same run, ${messageBytes} B messages, before / after the tool calls: batched publish ${formatRate(ceiling.batchedPublishPerSec)} / ${formatRate(ceilingAfter.batchedPublishPerSec)} (${ceiling.batchedInFlight} in flight), sync publish ${formatRate(ceiling.syncPublishPerSec)} / ${formatRate(ceilingAfter.syncPublishPerSec)}, KV CAS ${formatRate(ceiling.kvUpdatePerSec)} / ${formatRate(ceilingAfter.kvUpdatePerSec)}, request/reply ${formatRate(ceiling.requestReplyPerSec)} / ${formatRate(ceilingAfter.requestReplyPerSec)}`,
);
console.log(`ratio = calls/s ÷ (batched publish ceiling ÷ persisted writes per call), against the mean batched ceiling ${formatRate(batchedCeiling)}`);
console.log("");
console.log(`CPU bound = ${availableParallelism()} cores ÷ CPU per call of all four processes (this driver included): the most calls/s this machine could do`);
console.log("");
const totalCpu = (r: LevelResult) => PROCESSES.reduce((sum, p) => sum + r.cpuMs[p], 0);
console.log("| executor | in flight | calls | calls/s | p50 ms | p95 ms | p99 ms | writes/call | ceiling ÷ writes | ratio | CPU ms/call: gateway | executors | nats-server | driver | CPU bound |");
console.log("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
for (const r of results) {
  console.log(
    `| ${r.executor} | ${r.concurrency} | ${r.calls} | ${formatRate(r.callsPerSec)} | ${ms(r.p50)} | ${ms(r.p95)} | ${ms(r.p99)} | ${r.writesPerCall.toFixed(2)} | ${formatRate(perCallCeiling(r))} | ${((r.callsPerSec / perCallCeiling(r)) * 100).toFixed(1)}% | ${PROCESSES.map((p) => ms(r.cpuMs[p])).join(" | ")} | ${formatRate((availableParallelism() * 1000) / totalCpu(r))} |`,
  );
}
console.log("");
console.log("Per call: NATS messages each kind of client sent (in) and was delivered (out), counted by nats-server; read+write system calls of each process (/proc)");
console.log("");
const ROLES = ["gateway", "executors", "driver"] as const;
console.log(`| executor | in flight | ${ROLES.map((role) => `msgs ${role} in/out`).join(" | ")} | syscalls: ${PROCESSES.join(" | ")} |`);
console.log(`| --- | --- | ${ROLES.map(() => "---").join(" | ")} | ${PROCESSES.map(() => "---").join(" | ")} |`);
for (const r of results) {
  const msgs = (role: string) => {
    const t = r.traffic.get(role) ?? { in: 0, out: 0 };
    return `${(t.in / r.calls).toFixed(1)} / ${(t.out / r.calls).toFixed(1)}`;
  };
  console.log(`| ${r.executor} | ${r.concurrency} | ${ROLES.map(msgs).join(" | ")} | ${PROCESSES.map((p) => r.syscalls[p].toFixed(1)).join(" | ")} |`);
}
console.log("");
const streams = [...new Set(results.flatMap((r) => [...r.writes.keys()]))].sort();
console.log(`| stream | ${results.map((r) => `${r.executor} ${r.concurrency}`).join(" | ")} |`);
console.log(`| --- | ${results.map(() => "---").join(" | ")} |`);
for (const s of streams) console.log(`| ${s} | ${results.map((r) => ((r.writes.get(s) ?? 0) / r.calls).toFixed(2)).join(" | ")} |`);
console.log("");
for (const executor of EXECUTOR_KINDS) {
  const at = (c: number) => results.find((r) => r.executor === executor && r.concurrency === c);
  const hundred = at(100);
  const ten = at(10);
  if (!hundred || !ten) continue;
  const ratio = hundred.callsPerSec / perCallCeiling(hundred);
  const verdict = (ok: boolean) => (ok ? "met" : "MISSED");
  console.log(
    `targets (${executor}): ratio at 100 in flight ${(ratio * 100).toFixed(1)}% >= 40%: ${verdict(ratio >= 0.4)}; p50 at 10 ${ms(ten.p50)} ms <= 3: ${verdict(ten.p50 <= 3)}; p99 at 10 ${ms(ten.p99)} ms <= 15: ${verdict(ten.p99 <= 15)}`,
  );
}
