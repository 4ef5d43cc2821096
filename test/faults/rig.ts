import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { AssignmentRecord, WatchEntry } from "../../src/execution/model/records.js";
import { STORED_MAX_JSON_DEPTH } from "../../src/validation/json-depth.js";
import { decode } from "../../src/wire/codec.js";
import { checkHistory, formatReport, readEvidence, readHistory, type CheckReport, type ProjectionSnapshot } from "../../src/checker/index.js";
import { ConfigStore } from "../../src/config/config-store.js";
import type { ExecutionOptions } from "../../src/execution/execution.js";
import { EXECUTION_BUCKETS, RECEIPT_CONSUMER, STREAMS } from "../../src/streams/names.js";
import { natsServers } from "../../src/nats/servers.js";
import { ADMIN_KEY, seedSession } from "../helpers/execution-gateway.js";
import { ExecutorPool, startGatewayProcess, type ExecutorSpec, type GatewayProcess } from "../helpers/processes.js";
import { until } from "../helpers/until.js";
import { watchKey } from "../helpers/watches.js";

/** `TOOLGATE_FAULTS=full` (npm run test:faults) runs every scenario at full size; otherwise the quick slice. */
export const FULL = process.env.TOOLGATE_FAULTS === "full";
export const size = (quick: number, full: number): number => (FULL ? full : quick);

export const SCOPE = "faults";
export const WRITE_BINDING = "faults-write";
export const READ_BINDING = "faults-read";
/** `reports.generate`: a write that submits an async task, completed by the executor's business system a little later. */
export const TASK_BINDING = "faults-task";

/** Short leases and waits, so a fault heals in seconds rather than the production half-minute. */
export const FAULT_EXECUTION: Partial<ExecutionOptions> = { leaseMs: 3_000, sweepIntervalMs: 200, candidateAckWaitMs: 4_000, reofferAfterMs: 5_000 };

const SETTLED = new Set(["completed", "failed", "cancelled", "reconciliation_required", "withdrawn", "revoked", "abandoned"]);

/** Fault scenarios wait longer for a condition than the unit-sized suites. */
export const FAULT_WAIT_MS = 60_000;

export interface LoadPlan {
  runs: number;
  /** Runs in flight at once. */
  concurrentRuns: number;
  callsPerRun: number;
  /** Tool calls a run makes at once (a model's parallel tool calls) before waiting for them to settle. */
  batch: number;
  /** Share of runs cancelled while a batch is in flight. */
  cancelRate: number;
  /** Share of calls that are writes (the rest read). */
  writeShare: number;
  /** Share of the writes that submit an async task (`reports.generate`) instead of completing at once. */
  asyncShare?: number;
}

export interface LoadStats {
  runs: number;
  cancelled: number;
  calls: number;
  settled: number;
  httpRetries: number;
}

/**
 * One fault scenario's world: NATS (given), gateway child processes, supervised executor child
 * processes, and a load of runs driven over HTTP; it ends with the history checker.
 */
export class FaultRig {
  readonly dir = mkdtempSync(join(tmpdir(), "toolgate-faults-"));
  readonly gateways: GatewayProcess[] = [];
  readonly pool: ExecutorPool;
  readonly stats: LoadStats = { runs: 0, cancelled: 0, calls: 0, settled: 0, httpRetries: 0 };
  sessionId = "";
  private readonly gatewayEnv: Record<string, string>;
  private nc?: NatsConnection;
  private next = 0;

  constructor(
    /** NATS URL(s), comma-separated; a function because a restarted server keeps its port but a test may swap it. */
    readonly natsUrl: () => string,
    gatewayEnv: Record<string, string> = {},
  ) {
    // One identity drives what would be many runtimes: lift its rate limit above the load's polling.
    this.gatewayEnv = { TOOLGATE_RATE_LIMIT_RPS: "100000", TOOLGATE_RATE_LIMIT_BURST: "100000", ...gatewayEnv };
    this.pool = new ExecutorPool(natsUrl, this.dir);
  }

  async startGateway(execution: Partial<ExecutionOptions> = {}): Promise<GatewayProcess> {
    const gw = await startGatewayProcess(this.natsUrl(), { ...FAULT_EXECUTION, ...execution }, this.gatewayEnv);
    this.gateways.push(gw);
    return gw;
  }

  /** Seeds bindings, a toolset with `tasks.create` (write), `tasks.read` (read, 1 KiB budget), `reports.generate` (write, async) and a session. */
  async seed(): Promise<void> {
    this.nc = await connect({ servers: natsServers(this.natsUrl()), maxReconnectAttempts: -1 });
    const store = await ConfigStore.open(this.nc);
    this.sessionId = await seedSession(store, {
      scope: SCOPE,
      agent: "faults-bot",
      tools: [
        { name: "tasks.create", binding_id: WRITE_BINDING, tool_kind: "write" },
        { name: "tasks.read", binding_id: READ_BINDING, tool_kind: "read", max_result_context_bytes: 1024 },
        { name: "reports.generate", binding_id: TASK_BINDING, tool_kind: "write", max_result_context_bytes: 1024 },
      ],
    });
  }

  startExecutors(count: number, env: Record<string, string> = {}, prefix = "exec"): void {
    for (let i = 0; i < count; i++)
      this.startExecutor({ executorId: `${prefix}-${i}`, scope: SCOPE, binding: WRITE_BINDING, readBinding: READ_BINDING, env: { TASK_BINDING, ...env } });
  }

  startExecutor(spec: ExecutorSpec) {
    return this.pool.start(spec);
  }

  /** Gateways still alive. */
  live(): GatewayProcess[] {
    return this.gateways.filter((g) => g.proc.exitCode === null && g.proc.signalCode === null);
  }

  /**
   * JSON over HTTP to the live gateways in turn, retried on a network error or a 5xx until `timeoutMs`:
   * every request the load makes is idempotent (tool calls carry a tool_call_id, ends are idempotent).
   */
  async api<T = any>(method: "GET" | "POST", path: string, body?: unknown, timeoutMs = 90_000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const live = this.live();
      const gw = live[this.next++ % Math.max(live.length, 1)];
      let problem: string;
      try {
        if (!gw) throw new Error("no live gateway");
        const res = await fetch(gw.url + path, {
          method,
          headers: { authorization: `Bearer ${ADMIN_KEY}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
          body: body === undefined ? undefined : JSON.stringify(body),
          signal: AbortSignal.timeout(15_000),
        });
        const text = await res.text();
        if (res.status < 300) return (text ? JSON.parse(text) : undefined) as T;
        if (res.status < 500 && res.status !== 429) throw new Error(`${method} ${path}: HTTP ${res.status} ${text}`);
        problem = `HTTP ${res.status} ${text.slice(0, 200)}`;
      } catch (err) {
        if (err instanceof Error && err.message.startsWith(`${method} ${path}: HTTP 4`)) throw err;
        problem = String(err);
      }
      if (Date.now() > deadline) throw new Error(`${method} ${path} kept failing: ${problem}`);
      this.stats.httpRetries++;
      await delay(200);
    }
  }

  /** Drives the plan to the end: every run completed or cancelled, every call settled. */
  async drive(plan: LoadPlan): Promise<void> {
    let nextRun = 0;
    const worker = async () => {
      for (let r = nextRun++; r < plan.runs; r = nextRun++) await this.oneRun(r, plan);
    };
    await Promise.all(Array.from({ length: Math.min(plan.concurrentRuns, plan.runs) }, worker));
  }

  private async oneRun(r: number, plan: LoadPlan): Promise<void> {
    const run = await this.api("POST", `/v1/sessions/${this.sessionId}/runs`);
    this.stats.runs++;
    // Deterministic choice of the cancelled runs and of the batch they are cancelled in.
    const cancelEvery = plan.cancelRate > 0 ? Math.round(1 / plan.cancelRate) : 0;
    const batches = Math.ceil(plan.callsPerRun / plan.batch);
    const cancelAt = cancelEvery > 0 && r % cancelEvery === cancelEvery - 1 ? Math.floor(batches / 2) : -1;
    for (let b = 0; b < batches; b++) {
      const ids = await Promise.all(
        Array.from({ length: Math.min(plan.batch, plan.callsPerRun - b * plan.batch) }, async (_, i) => {
          const k = b * plan.batch + i;
          const draw = (r * 7919 + k * 104729) % 100;
          const write = draw < plan.writeShare * 100;
          // The first writes of the draw's range submit async tasks (deterministic, like the rest of the mix).
          const async = draw < plan.writeShare * (plan.asyncShare ?? 0) * 100;
          const call = async
            ? { tool_name: "reports.generate", arguments: { title: `r${r}-c${k}` } }
            : write
              ? { tool_name: "tasks.create", arguments: { title: `r${r}-c${k}` } }
              : { tool_name: "tasks.read", arguments: { cursor: `r${r}-c${k}` } };
          const { assignment } = await this.api("POST", `/v1/runs/${run.run_id}/tool-calls`, { ...call, tool_call_id: `c-${k}` });
          this.stats.calls++;
          return assignment.assignment_id as string;
        }),
      );
      if (b === cancelAt) {
        await this.api("POST", `/v1/runs/${run.run_id}:cancel`);
        this.stats.cancelled++;
        this.stats.settled += ids.length;
        return;
      }
      await this.settled(run.run_id, ids);
    }
    await this.api("POST", `/v1/runs/${run.run_id}:complete`);
  }

  /** Polls the run's history (which is what the model reads) until the given calls are settled. */
  private async settled(runId: string, ids: string[]): Promise<void> {
    const wanted = new Set(ids);
    const done = new Set<string>();
    try {
      await until(
        `run ${runId}: ${ids.length} tool calls settled`,
        async () => {
          const history = await this.api("GET", `/v1/runs/${runId}/history`);
          // Every asked call must be listed and settled: a history missing one (a stale read) is not "settled".
          done.clear();
          for (const c of history.tool_calls as Array<{ assignment_id: string; state: string }>)
            if (wanted.has(c.assignment_id) && SETTLED.has(c.state)) done.add(c.assignment_id);
          return done.size === wanted.size ? true : undefined;
        },
        180_000,
        250,
      );
    } catch (err) {
      process.stderr.write(`${await this.unsettledReport(ids.filter((id) => !done.has(id)))}\n`);
      throw err;
    }
    this.stats.settled += ids.length;
  }

  /** What a stuck call's records say (state, claim, candidate, watch), so a stall names its cause. */
  private async unsettledReport(ids: string[]): Promise<string> {
    const kvm = new Kvm(this.nc!);
    const [assignments, watches] = await Promise.all([kvm.open(EXECUTION_BUCKETS.assignments), kvm.open(EXECUTION_BUCKETS.watch)]);
    const lines = await Promise.all(
      ids.map(async (id) => {
        // The watch is a key of the assignments bucket from store layout 6 on, an entry of the watch bucket before.
        const [a, w] = await Promise.all([assignments.get(id), assignments.get(watchKey(id)).then((w) => w ?? watches.get(id))]);
        const record = a?.operation === "PUT" ? decode(AssignmentRecord, a.value, STORED_MAX_JSON_DEPTH) : null;
        const watch = w?.operation === "PUT" ? decode(WatchEntry, w.value) : null;
        const { arguments: _args, ...shown } = record ?? {};
        return `unsettled ${id}: ${JSON.stringify(record ? shown : null)} watch ${JSON.stringify(watch)} (now ${Date.now()})`;
      }),
    );
    return lines.join("\n");
  }

  /**
   * Ends the scenario: stops the executors cleanly (their outboxes flush), waits until the gateways
   * processed every receipt, then checks the stored history with the executors' ledgers and stores.
   */
  async check(snapshot?: ProjectionSnapshot): Promise<CheckReport> {
    await this.pool.stop();
    const nc = this.nc!;
    const jsm = await jetstreamManager(nc);
    await until(
      "every receipt processed",
      async () => {
        const info = await jsm.consumers.info(STREAMS.receipts, RECEIPT_CONSUMER);
        return info.num_pending === 0 && info.num_ack_pending === 0 ? true : undefined;
      },
      FAULT_WAIT_MS,
    );
    const evidence = readEvidence({ ledgers: this.pool.executors.map((e) => e.ledger), outboxes: this.pool.executors.map((e) => e.store) });
    const report = checkHistory(await readHistory(nc), { evidence, snapshot });
    if (!report.ok) process.stderr.write(formatReport(report) + "\n");
    return report;
  }

  /** A one-line summary for the test log (and docs/reliability.md). */
  summary(report: CheckReport): string {
    return `runs ${this.stats.runs} (${this.stats.cancelled} cancelled), calls ${this.stats.calls}, tool calls ${JSON.stringify(report.counts.tool_calls)}, receipts ${report.counts.receipts_in_stream}, side effects ${report.counts.side_effects}, executor kills ${this.pool.totalKills} ${JSON.stringify(Object.fromEntries(this.pool.kills))}, restarts ${this.pool.restarts}, http retries ${this.stats.httpRetries}`;
  }

  async close(): Promise<void> {
    await this.pool.stop().catch(() => undefined);
    await Promise.all(this.live().map((g) => g.stop()));
    await this.nc?.close();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
