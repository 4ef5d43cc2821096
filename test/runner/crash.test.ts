import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decode } from "../../src/wire/codec.js";
import { ReceiptMessage } from "../../src/wire/messages.js";
import { itemsOf } from "../../src/wire/primitives.js";
import { subjects } from "../../src/wire/subjects.js";
import { CRASH_POINTS } from "../fixtures/crash-points.js";
import { startTestNats, type TestNats } from "../helpers/nats.js";
import { publishTasksAgent } from "./helpers/tasks-agent.js";
import { startExecutionGateway, SHORT_LEASES, type TestGateway } from "../helpers/execution-gateway.js";
import { until } from "../helpers/until.js";
import { STREAMS } from "../../src/streams/names.js";

const FIXTURE = fileURLToPath(new URL("../fixtures/crash-executor.ts", import.meta.url));
const SETTLED = new Set(["completed", "failed", "cancelled", "reconciliation_required"]);

/** What the assignment ends as after a SIGKILL at each point and a restart of the same executor. */
const EXPECTED: Record<(typeof CRASH_POINTS)[number], string> = {
  after_claim: "completed", // nothing saved: the lease expires, the same executor claims generation 1
  after_persist: "completed", // accepted resent (replayed); confirmed, or refused and claimed again
  after_confirm: "completed", // confirmed but never started: the handler starts once
  mid_handler: "reconciliation_required", // the write may have happened: reported, never rerun
  after_final_saved: "completed", // the saved completed is resent with replayed: true
  after_send_before_answer: "completed", // resent: de-duplicated, answered from the receipt index
};

describe("crash tests: a child-process executor SIGKILLed at each point, then restarted", () => {
  let nats: TestNats;
  let gw: TestGateway;
  let nc: NatsConnection;
  let dir: string;
  const children: ChildProcess[] = [];

  beforeAll(async () => {
    nats = await startTestNats();
    gw = await startExecutionGateway(nats.url, { ...SHORT_LEASES, leaseMs: 2_500 });
    nc = await connect({ servers: nats.url });
    dir = mkdtempSync(join(tmpdir(), "toolgate-crash-"));
  });
  afterAll(async () => {
    for (const child of children) child.kill("SIGKILL");
    await nc?.close();
    await gw?.close();
    await nats?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  function startExecutor(env: Record<string, string>): ChildProcess & { ready: Promise<void> } {
    const child = spawn(process.execPath, ["--import", "tsx", FIXTURE], {
      env: { ...process.env, LOG_LEVEL: "warn", ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    child.stderr!.resume();
    children.push(child);
    const ready = new Promise<void>((resolve) => child.stdout!.on("data", (chunk: Buffer) => chunk.toString().includes("ready") && resolve()));
    return Object.assign(child, { ready });
  }

  const exited = (child: ChildProcess) =>
    new Promise<NodeJS.Signals | number | null>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve(child.signalCode ?? child.exitCode);
      child.once("exit", (code, signal) => resolve(signal ?? code));
    });

  /** receipt_id -> how many copies the receipts stream holds for one assignment. */
  async function receiptCopies(scope: string, executorId: string, assignmentId: string): Promise<Map<string, number>> {
    const jsm = await jetstreamManager(nc);
    const copies = new Map<string, number>();
    const info = await jsm.streams.info(STREAMS.receipts);
    for (let seq = info.state.first_seq; seq <= info.state.last_seq; seq++) {
      const m = await jsm.streams.getMessage(STREAMS.receipts, { seq }).catch(() => null);
      if (!m || m.subject !== subjects.receipt(scope, executorId, assignmentId)) continue;
      for (const { receipt_id: id } of itemsOf(decode(ReceiptMessage, m.data))) copies.set(id, (copies.get(id) ?? 0) + 1);
    }
    return copies;
  }

  it.each(CRASH_POINTS)("%s", async (point) => {
    const scope = `crash-${point.replaceAll("_", "-")}`;
    const binding = `${scope}-write`;
    const { sessionId } = await publishTasksAgent(gw, { scope, readBinding: `${scope}-read`, writeBinding: binding, agent: `${scope}-agent` });
    const run = await gw.api("POST", `/v1/sessions/${sessionId}/runs`);
    const { assignment } = await gw.api("POST", `/v1/runs/${run.run_id}/tool-calls`, { tool_name: "tasks.create", arguments: { title: point } });
    const id: string = assignment.assignment_id;

    const env = {
      NATS_URL: nats.url,
      RUNNER_STORE: join(dir, `${point}.db`),
      EFFECTS_DB: join(dir, `${point}-effects.db`),
      EXECUTOR_ID: `exec-${scope}`,
      SCOPE: scope,
      BINDING: binding,
      TOOLGATE_CRASH_POINT: point,
    };
    expect(await exited(startExecutor(env))).toBe("SIGKILL");
    expect(existsSync(`${env.RUNNER_STORE}.crashed`)).toBe(true);

    const restarted = startExecutor(env);
    const a = await until(
      `${point}: assignment settled after the restart`,
      async () => {
        const got = await gw.api("GET", `/v1/assignments/${id}`);
        return SETTLED.has(got.state) ? got : undefined;
      },
      30_000,
    );
    expect(a.state).toBe(EXPECTED[point]);
    if (a.state === "reconciliation_required") expect(a.outcome.error.code).toBe("executor_restarted");

    // The gateway holds the final receipt, so every receipt before it is in the stream: each exactly once.
    const copies = await receiptCopies(scope, `exec-${scope}`, id);
    expect([...copies.values()].every((n) => n === 1)).toBe(true);
    expect(copies.has(a.final_receipt_id)).toBe(true);
    const history = await gw.api("GET", `/v1/runs/${run.run_id}/history`);
    expect(history.tool_calls.filter((c: { assignment_id: string }) => c.assignment_id === id)).toHaveLength(1);

    const effects = new Database(env.EFFECTS_DB, { readonly: true });
    const count = effects.prepare("SELECT count(*) FROM effects WHERE assignment_id = ?").pluck().get(id) as number;
    effects.close();
    expect(count).toBe(1);

    // A clean stop, then the executor's own record: every receipt answered, the final one accepted
    // by the gateway (a replay answered from the receipt index, or recorded on first arrival).
    await restarted.ready;
    restarted.kill("SIGTERM");
    expect(await exited(restarted)).toBe(0);
    const store = new Database(env.RUNNER_STORE, { readonly: true });
    const rows = store.prepare("SELECT kind, answer_status FROM receipts WHERE assignment_id = ? ORDER BY position").all(id) as Array<{
      kind: string;
      answer_status: string | null;
    }>;
    store.close();
    expect(rows.every((r) => r.answer_status !== null)).toBe(true);
    expect(rows.at(-1)).toEqual({ kind: a.state, answer_status: expect.stringMatching(/^(recorded|duplicate)$/) });
  });

  it("a restart with its store lost (same executor id, an empty store): the write it was running is reconciliation_required at once, not left running while the id stays present", async () => {
    const scope = "crash-store-lost";
    const binding = `${scope}-write`;
    const { sessionId } = await publishTasksAgent(gw, { scope, readBinding: `${scope}-read`, writeBinding: binding, agent: `${scope}-agent` });
    const run = await gw.api("POST", `/v1/sessions/${sessionId}/runs`);
    const { assignment } = await gw.api("POST", `/v1/runs/${run.run_id}/tool-calls`, { tool_name: "tasks.create", arguments: { title: "lost" } });
    const id: string = assignment.assignment_id;
    const env = {
      NATS_URL: nats.url,
      RUNNER_STORE: join(dir, "store-lost.db"),
      EFFECTS_DB: join(dir, "store-lost-effects.db"),
      EXECUTOR_ID: `exec-${scope}`,
      SCOPE: scope,
      BINDING: binding,
      TOOLGATE_CRASH_POINT: "mid_handler",
    };
    expect(await exited(startExecutor(env))).toBe("SIGKILL");
    expect((await gw.api("GET", `/v1/assignments/${id}`)).state).toBe("running");

    // The same id on a fresh store: its heartbeats keep the id present, so only its report can end the claim.
    const restarted = startExecutor({ ...env, RUNNER_STORE: join(dir, "store-lost-fresh.db"), TOOLGATE_CRASH_POINT: "" });
    await restarted.ready;
    const a = await gw.api("GET", `/v1/assignments/${id}`);
    expect([a.state, a.outcome.error.code, a.generation]).toEqual(["reconciliation_required", "executor_detached", 0]);
    expect(a.outcome.error.message).toContain("without this claim in its store");
    restarted.kill("SIGTERM");
    expect(await exited(restarted)).toBe(0);
  });
});
