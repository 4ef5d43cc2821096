import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BusinessFailure, dryRun, SqliteRunnerStore, ToolRunner, type ToolContext, type ToolRunnerOptions } from "../../src/runner/index.js";
import { buildReceipt } from "../../src/runner/receipts.js";
import { sampleGrant } from "./helpers/grants.js";
import { MockReceiptSchema } from "../../src/dryrun/schemas.js";
import { decode, encode } from "../../src/wire/codec.js";
import { ClaimReply } from "../../src/wire/messages.js";
import { startTestNats, type TestNats } from "../helpers/nats.js";
import { publishTasksAgent } from "./helpers/tasks-agent.js";
import { ADMIN_KEY, startExecutionGateway, SHORT_LEASES, type TestGateway } from "../helpers/execution-gateway.js";
import { until } from "../helpers/until.js";

const SCOPE = "tasks-product";
const TERMINAL = new Set(["completed", "failed", "cancelled", "reconciliation_required"]);

describe("ToolRunner against the real gateway", () => {
  let nats: TestNats;
  let gw: TestGateway;
  let sessionId: string;
  let agentVersion: string;
  let dir: string;
  let runner: ToolRunner;
  const created: string[] = [];
  const handlerCalls: string[] = [];
  let refuseSubject: string | undefined;
  let tamper = false;
  const gate = new Gate();

  const fast: Partial<ToolRunnerOptions> = {
    answerTimeoutMs: 500,
    maxResendIntervalMs: 1_000,
    requestTimeoutMs: 1_000,
    pullExpiresMs: 1_000,
    releaseDelayMs: 100,
  };

  beforeAll(async () => {
    nats = await startTestNats();
    gw = await startExecutionGateway(nats.url, SHORT_LEASES);
    ({ sessionId, agentVersion } = await publishTasksAgent(gw, {
      scope: SCOPE,
      readBinding: "tasks-read",
      writeBinding: "tasks-write",
      agent: "tasks-agent",
      executorId: "exec-a",
    }));
    dir = mkdtempSync(join(tmpdir(), "toolgate-runner-e2e-"));
    const nc = tamperingConnection(await connect({ servers: nats.url, maxReconnectAttempts: -1, reconnectTimeWait: 200 }), () => tamper);
    runner = await ToolRunner.start({
      nc,
      executorId: "exec-a",
      scope: SCOPE,
      store: join(dir, "runner.db"),
      logger: pino({ level: process.env.TEST_RUNNER_LOG ?? "silent" }),
      authorize: (req) =>
        refuseSubject !== undefined && (req.arguments as { title?: string }).title === refuseSubject
          ? { allowed: false, reason: "user-42 may not create this" }
          : true,
      ...fast,
      tools: {
        "tasks.read": {
          kind: "read",
          bindingId: "tasks-read",
          async handler(ctx: ToolContext<{ cursor?: string }>) {
            handlerCalls.push(ctx.grant.assignment_id);
            await ctx.progress({ page: 1 });
            await ctx.progress({ page: 2 });
            return { next_cursor: "page-2", tasks: Array.from({ length: 40 }, (_, i) => ({ id: `t-${i}`, title: `task number ${i}` })) };
          },
        },
        "tasks.create": {
          kind: "write",
          bindingId: "tasks-write",
          async handler(ctx: ToolContext<{ title: string }>) {
            handlerCalls.push(ctx.grant.assignment_id);
            if (ctx.arguments.title === "explode") throw new Error("database connection lost after the insert");
            if (ctx.arguments.title === "duplicate") throw new BusinessFailure("duplicate_title", "a task with this title exists");
            if (ctx.arguments.title === "slow") await gate.enter(ctx.grant.assignment_id);
            created.push(ctx.grant.operation_key);
            await ctx.progress({ step: "inserted" });
            return { task_id: `task-${created.length}`, title: ctx.arguments.title };
          },
        },
      },
    });
  });

  afterAll(async () => {
    await runner?.close({ deadlineMs: 1_000 });
    await gw?.close();
    await nats?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  async function toolCall(toolName: string, args: unknown): Promise<{ runId: string; assignmentId: string }> {
    const run = await gw.api("POST", `/v1/sessions/${sessionId}/runs`);
    const { assignment } = await gw.api("POST", `/v1/runs/${run.run_id}/tool-calls`, { tool_name: toolName, arguments: args });
    return { runId: run.run_id, assignmentId: assignment.assignment_id };
  }

  const settled = (assignmentId: string, states = TERMINAL) =>
    until(`assignment ${assignmentId} to settle`, async () => {
      const a = await gw.api("GET", `/v1/assignments/${assignmentId}`);
      return states.has(a.state) ? a : undefined;
    });

  /** A refusal is one `refused` receipt (`claimed --refuse--> failed`): no `accepted` ever left the executor. */
  async function expectRefusedWithoutAccepted(assignmentId: string, a: { accepted_receipt_id: string | null; final_receipt_id: string | null }): Promise<void> {
    expect(a.accepted_receipt_id).toBeNull();
    expect(a.final_receipt_id).toMatch(new RegExp(`^${assignmentId}_g0_refused_`));
    const local = await until("local settle", async () =>
      (await runner.assignment(assignmentId))?.phase === "settled" ? runner.assignment(assignmentId) : undefined,
    );
    expect(local!.receipts.map((r) => [r.kind, r.answer?.status])).toEqual([["refused", "recorded"]]);
  }

  it("runs a read tool end to end: grant, accepted, ordered progress, completed, projection in history", async () => {
    const { runId, assignmentId } = await toolCall("tasks.read", { cursor: "page-1" });
    const a = await settled(assignmentId);
    expect(a.state).toBe("completed");
    expect(a.progress.map((p: { seq: number; progress: unknown }) => [p.seq, p.progress])).toEqual([
      [1, { page: 1 }],
      [2, { page: 2 }],
    ]);
    const history = await gw.api("GET", `/v1/runs/${runId}/history`);
    expect(history.tool_calls[0].context_preview).toMatchObject({ max_result_context_bytes: 1024, truncated: true });
    const local = await until("local settle", async () =>
      (await runner.assignment(assignmentId))?.phase === "settled" ? runner.assignment(assignmentId) : undefined,
    );
    expect(local!.receipts.map((r) => [r.kind, r.answer?.status])).toEqual([
      ["accepted", "recorded"],
      ["progress", "recorded"],
      ["progress", "recorded"],
      ["completed", "recorded"],
    ]);
  });

  it("deletes from its store, from the start on, the claims settled longer ago than retainSettledMs; keeps open and younger ones", async () => {
    const path = join(dir, "prune.db");
    const seeded = new SqliteRunnerStore(path);
    await seeded.open("exec-prune");
    const day = 86_400_000;
    const claim = async (id: string, phase: "settled" | "awaiting_reconciliation", age: number) => {
      const grant = sampleGrant({ assignment_id: id, executor_id: "exec-prune" });
      const at = Date.now() - age;
      await seeded.createAssignment({ assignmentId: id, generation: 0, grant, phase, createdAt: at, updatedAt: at }, [
        buildReceipt(grant, { kind: "completed", result: { id } }, at),
      ]);
    };
    await claim("asg-old-settled", "settled", 3 * day);
    await claim("asg-old-open", "awaiting_reconciliation", 3 * day);
    await claim("asg-young-settled", "settled", day / 2);
    await seeded.close();
    const pruning = await ToolRunner.start({
      natsUrl: nats.url,
      executorId: "exec-prune",
      scope: SCOPE,
      store: path,
      logger: pino({ level: "silent" }),
      authorize: () => true,
      ...fast,
      retainSettledMs: day,
      tools: { "tasks.read": { kind: "read", bindingId: "tasks-read", handler: () => ({}) } },
    });
    try {
      await until("the old settled claim to be pruned", async () => ((await pruning.assignment("asg-old-settled")) === undefined ? true : undefined));
      expect((await pruning.assignment("asg-old-open"))?.phase).toBe("awaiting_reconciliation");
      expect((await pruning.assignment("asg-young-settled"))?.receipts).toHaveLength(1);
    } finally {
      await pruning.close({ deadlineMs: 0 });
    }
  });

  it("runs a write tool once and reports its progress", async () => {
    const { assignmentId } = await toolCall("tasks.create", { title: "write the report" });
    const a = await settled(assignmentId);
    expect(a.state).toBe("completed");
    expect(a.progress.map((p: { seq: number }) => p.seq)).toEqual([1]);
    expect(created.filter((k) => k === a.operation_key)).toHaveLength(1);
  });

  it("reports a confirmed business failure as failed", async () => {
    const { assignmentId } = await toolCall("tasks.create", { title: "duplicate" });
    const a = await settled(assignmentId);
    expect(a.state).toBe("failed");
    expect(a.outcome).toEqual({ kind: "failed", error: { code: "duplicate_title", message: "a task with this title exists" } });
  });

  it("turns an ordinary exception into reconciliation_required, then settles it with reconcile()", async () => {
    const { assignmentId } = await toolCall("tasks.create", { title: "explode" });
    const a = await settled(assignmentId);
    expect(a.state).toBe("reconciliation_required");
    expect(a.outcome.error.code).toBe("handler_error");
    expect(a.outcome.error.message).toContain("database connection lost");
    await until("awaiting reconciliation locally", async () =>
      (await runner.reconciliations()).some((g) => g.assignment_id === assignmentId) ? true : undefined,
    );
    await runner.reconcile(assignmentId, { kind: "completed", result: { task_id: "task-found-in-db" } });
    const after = await settled(assignmentId, new Set(["completed"]));
    expect(after.final_receipt_id).toMatch(new RegExp(`^${assignmentId}_g0_completed_`));
  });

  it("refuses before any side effect when authorize says no", async () => {
    refuseSubject = "forbidden task";
    const { assignmentId } = await toolCall("tasks.create", { title: "forbidden task" });
    const a = await settled(assignmentId);
    expect(a.state).toBe("failed");
    expect(a.outcome.error.code).toBe("authorization_refused");
    expect(handlerCalls).not.toContain(assignmentId);
    await expectRefusedWithoutAccepted(assignmentId, a);
  });

  it("refuses tampered arguments (digest mismatch) before authorize and the handler", async () => {
    tamper = true;
    try {
      const { assignmentId } = await toolCall("tasks.create", { title: "innocent" });
      const a = await settled(assignmentId);
      expect(a.state).toBe("failed");
      expect(a.outcome.error.code).toBe("argument_digest_mismatch");
      expect(handlerCalls).not.toContain(assignmentId);
      await expectRefusedWithoutAccepted(assignmentId, a);
    } finally {
      tamper = false;
    }
  });

  it("previews what the model will see of a real result sample with the dry-run client", async () => {
    const sample = { next_cursor: "page-2", tasks: Array.from({ length: 60 }, (_, i) => ({ id: `t-${i}`, title: `task ${i}` })) };
    const preview = await dryRun(
      { baseUrl: gw.baseUrl, apiKey: ADMIN_KEY },
      { agent_version: agentVersion, tool_name: "tasks.read", arguments: {}, mock_receipts: [{ result: sample }] },
    );
    expect(preview.execution_verified).toBe(false);
    expect(preview.context_preview).toMatchObject({ max_result_context_bytes: 1024, truncated: true });
    expect(preview.context_preview!.retained_bytes).toBeLessThanOrEqual(1024);
    // Every kind the gateway's mock receipt takes goes through the runner's types and comes back parsed by the route's own answer schema.
    const kinds = MockReceiptSchema.shape.kind.options;
    const samples = kinds.map((kind) => (kind === "submission" ? { kind, task_ref: "job-1", status: "queued" } : { kind, result: sample }));
    const all = await dryRun(
      { baseUrl: gw.baseUrl, apiKey: ADMIN_KEY },
      { agent_version: agentVersion, tool_name: "tasks.read", arguments: {}, mock_receipts: samples },
    );
    expect(all.steps.map((step) => [step.receipt_id, step.kind])).toEqual(kinds.map((kind, i) => [`dry-run-${i + 1}`, kind]));
    await expect(
      dryRun(
        { baseUrl: gw.baseUrl, apiKey: "wrong-key-0123456789" },
        { agent_version: agentVersion, tool_name: "tasks.read", arguments: {}, mock_receipts: [] },
      ),
    ).rejects.toMatchObject({ status: 401 });
  });

  it("delivers the outbox after a gateway restart: the receipt saved while no gateway runs is answered later", async () => {
    const { assignmentId } = await toolCall("tasks.create", { title: "slow" });
    await until("the handler to start", () => gate.started.has(assignmentId) || undefined);
    await gw.close();
    gate.release();
    await until("the completed receipt to be saved", async () =>
      (await runner.assignment(assignmentId))?.receipts.some((r) => r.kind === "completed") ? true : undefined,
    );
    gw = await startExecutionGateway(nats.url, SHORT_LEASES);
    expect((await settled(assignmentId)).state).toBe("completed");
    const local = await until("local settle", async () =>
      (await runner.assignment(assignmentId))?.phase === "settled" ? runner.assignment(assignmentId) : undefined,
    );
    expect(local!.receipts.at(-1)?.answer?.status).toMatch(/^(recorded|duplicate)$/);
  });

  it("delivers the outbox across a NATS restart", async () => {
    const { assignmentId } = await toolCall("tasks.create", { title: "slow" });
    await until("the handler to start", () => gate.started.has(assignmentId) || undefined);
    await nats.restart();
    gate.release();
    const a = await settled(assignmentId);
    expect(a.state).toBe("completed");
    expect(created.filter((k) => k === a.operation_key)).toHaveLength(1);
  });
});

/** Rewrites the arguments of granted claims while `enabled()`: the digest no longer matches. */
function tamperingConnection(nc: NatsConnection, enabled: () => boolean): NatsConnection {
  return new Proxy(nc, {
    get(target, prop, receiver) {
      if (prop !== "request") return Reflect.get(target, prop, receiver);
      return async (subject: string, data: Uint8Array, opts: unknown) => {
        const reply = await target.request(subject, data, opts as never);
        if (!enabled() || !subject.startsWith("tg.claim.")) return reply;
        const decoded = decode(ClaimReply, reply.data);
        if (decoded.status !== "granted") return reply;
        const forged = encode({ ...decoded, grant: { ...decoded.grant, arguments: { title: "drop all tasks" } } });
        return { ...reply, data: forged };
      };
    },
  });
}

/** Holds handlers until the test releases them. */
class Gate {
  readonly started = new Set<string>();
  private waiting: Array<() => void> = [];
  enter(id: string): Promise<void> {
    this.started.add(id);
    return new Promise((resolve) => this.waiting.push(resolve));
  }
  release(): void {
    for (const go of this.waiting.splice(0)) go();
  }
}
