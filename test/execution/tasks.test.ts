import type { NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkHistory, readHistory } from "../../src/checker/index.js";
import { AssignmentRecord, RunRecord } from "../../src/execution/model/records.js";
import { watchlistOn } from "../helpers/watches.js";
import { RECEIPT_CONSUMER, STREAMS } from "../../src/streams/names.js";
import { BackgroundTasks } from "../../src/execution/tasks/background-tasks.js";
import { executionStores } from "../../src/kv/buckets.js";
import { createLogger } from "../../src/log/logger.js";
import { encode } from "../../src/wire/codec.js";
import { TASK_STATUS_MAX_BYTES, type Grant } from "../../src/wire/messages.js";
import { subjects } from "../../src/wire/subjects.js";
import { definitionsWithPresenceTtl, startExecutionFixture, type ExecutionFixture, type TestGateway } from "../helpers/execution-gateway.js";
import type { ProtocolExecutor } from "../helpers/protocol-executor.js";
import { until } from "../helpers/until.js";

/**
 * The `submission` receipt and the `submitted` state at the wire: a protocol-level executor (no SDK)
 * drives the real gateway on a real nats-server, including what a correct executor never sends.
 */
const SCOPE = "async-wire";
const PRESENCE_TTL_MS = 2_000;

describe("async tasks on the wire: submission, submitted, one settlement", () => {
  let fx: ExecutionFixture, gw: TestGateway, nc: NatsConnection, executor: ProtocolExecutor, sessionId: string;
  beforeAll(async () => {
    fx = await startExecutionFixture({
      scope: SCOPE,
      agent: "async-agent",
      tools: [{ name: "report.make", binding_id: "async-write", tool_kind: "write" }],
      executor: { id: "wire-exec" },
      execution: { leaseMs: 3_000, sweepIntervalMs: 100 },
      definitions: definitionsWithPresenceTtl(PRESENCE_TTL_MS),
    });
    ({ gw, nc, executor, sessionId } = fx);
  });
  afterAll(() => fx?.close());

  /** A tool call claimed and confirmed by the protocol executor: its grant. */
  async function confirmed(): Promise<{ runId: string; grant: Grant }> {
    const run = (await gw.http("POST", `/v1/sessions/${sessionId}/runs`)).body;
    const { assignment } = (await gw.http("POST", `/v1/runs/${run.run_id}/tool-calls`, { tool_name: "report.make", arguments: {} })).body;
    await executor.heartbeat();
    const candidate = await executor.pullFor(assignment.assignment_id);
    const reply = await executor.claim(assignment.assignment_id, candidate.generation);
    if (reply.status !== "granted") throw new Error(`claim refused: ${reply.code}`);
    expect((await executor.send(executor.accepted(reply.grant))).status).toBe("recorded");
    return { runId: run.run_id, grant: reply.grant };
  }
  const assignment = async (id: string) => (await gw.http("GET", `/v1/assignments/${id}`)).body;

  it("applies a submission once: the same again is a duplicate, another body under its id a conflict, a second submission illegal", async () => {
    const { grant } = await confirmed();
    const submission = executor.receipt(grant, { kind: "submission", task_ref: "job-1", status: "queued" }, `${grant.assignment_id}_sub`);
    expect(await executor.send(submission)).toMatchObject({ status: "recorded" });
    expect(await assignment(grant.assignment_id)).toMatchObject({
      state: "submitted",
      task: { task_ref: "job-1", status: "queued" },
      final_receipt_id: submission.receipt_id,
    });
    // Past the stream's de-duplication (another msg id): the assignment itself answers for it.
    expect(await executor.send(submission, `${submission.receipt_id}-again`)).toMatchObject({ status: "duplicate" });
    const other = executor.receipt(grant, { kind: "submission", task_ref: "job-1", status: "something else" }, submission.receipt_id);
    expect(await executor.send(other, `${submission.receipt_id}-other`)).toMatchObject({ status: "rejected", code: "receipt_conflict" });
    expect(await executor.send(executor.receipt(grant, { kind: "submission", task_ref: "job-2", status: "queued" }))).toMatchObject({
      status: "rejected",
      code: "illegal_transition",
    });
    // Progress while submitted is stored like any progress.
    expect(await executor.send(executor.receipt(grant, { kind: "progress", seq: 1, progress: { pct: 40 } }))).toMatchObject({ status: "recorded" });
    expect((await assignment(grant.assignment_id)).progress).toMatchObject([{ seq: 1, progress: { pct: 40 } }]);
    await executor.send(executor.receipt(grant, { kind: "completed", result: { done: true } }));
    // The settled task still answers for its submission (kept among the replaced receipts).
    expect(await executor.send(submission, `${submission.receipt_id}-late`)).toMatchObject({ status: "duplicate" });
  });

  it("refuses a submission before `accepted` was confirmed, and never applies an oversized one", async () => {
    const run = (await gw.http("POST", `/v1/sessions/${sessionId}/runs`)).body;
    const { assignment: created } = (await gw.http("POST", `/v1/runs/${run.run_id}/tool-calls`, { tool_name: "report.make", arguments: {} })).body;
    await executor.heartbeat();
    const candidate = await executor.pullFor(created.assignment_id);
    const reply = await executor.claim(created.assignment_id, candidate.generation);
    if (reply.status !== "granted") throw new Error(`claim refused: ${reply.code}`);
    expect(await executor.send(executor.receipt(reply.grant, { kind: "submission", task_ref: "job-early", status: "queued" }))).toMatchObject({
      status: "rejected",
      code: "illegal_transition",
    });
    expect((await executor.send(executor.accepted(reply.grant))).status).toBe("recorded");

    // Over the schema's bound: not a Receipt, so the consumer terminates it (it stays in the stream for audit) and nothing changes.
    const huge = {
      ...executor.receipt(reply.grant, { kind: "submission", task_ref: "job-huge", status: "ok" }),
      status: "x".repeat(TASK_STATUS_MAX_BYTES + 1),
    };
    const js = (await import("@nats-io/jetstream")).jetstream(nc);
    await js.publish(subjects.receipt(SCOPE, executor.executorId, created.assignment_id), encode(huge), { msgID: huge.receipt_id });
    const jsm = await jetstreamManager(nc);
    await until("the receipt consumer drained", async () => {
      const info = await jsm.consumers.info(STREAMS.receipts, RECEIPT_CONSUMER);
      return info.num_pending === 0 && info.num_ack_pending === 0 ? true : undefined;
    });
    expect(await assignment(created.assignment_id)).toMatchObject({ state: "running", task: null });
    await executor.send(executor.receipt(reply.grant, { kind: "failed", error: { code: "not_started", message: "never queued" } }));
  });

  it("settles a submitted task once when completed and cancelled race: exactly one is recorded", async () => {
    const { runId, grant } = await confirmed();
    await executor.send(executor.receipt(grant, { kind: "submission", task_ref: "job-race", status: "queued" }));
    expect((await gw.http("POST", `/v1/assignments/${grant.assignment_id}:cancel-task`, { reason: "stop" })).body.state).toBe("submitted");
    await until("the task cancel told to the executor", async () =>
      executor.controls.some((c) => c.type === "task_cancel_requested" && c.assignment_id === grant.assignment_id) ? true : undefined,
    );
    const answers = await Promise.all([
      executor.send(executor.receipt(grant, { kind: "completed", result: { done: true } })),
      executor.send(executor.receipt(grant, { kind: "cancelled", reason: "stopped" })),
    ]);
    expect(answers.map((a) => a.status).sort()).toEqual(["recorded", "rejected"]);
    expect(answers.find((a) => a.status === "rejected")).toMatchObject({ code: "illegal_transition" });
    const winner = answers.find((a) => a.status === "recorded")!;
    const a = await assignment(grant.assignment_id);
    expect(a.state).toBe("kind" in winner ? winner.kind : "");
    const history = await until("the task result in history", async () => {
      const h = (await gw.http("GET", `/v1/runs/${runId}/history`)).body;
      return h.task_results.length > 0 ? h : undefined;
    });
    expect(history.task_results.map((t: { state: string }) => t.state)).toEqual([a.state]);
  });

  it("keeps a submitted task when its executor's presence lapses, while its running work is detached", async () => {
    const running = await confirmed();
    const submitted = await confirmed();
    await executor.send(executor.receipt(submitted.grant, { kind: "submission", task_ref: "job-kept", status: "queued" }));
    // No more heartbeats: the sweeper detaches the running work once the presence lapsed.
    const detached = await until(
      "the running work detached",
      async () => {
        const a = await assignment(running.grant.assignment_id);
        return a.state === "reconciliation_required" ? a : undefined;
      },
      20_000,
    );
    expect(detached.outcome.error.code).toBe("executor_detached");
    expect((await assignment(submitted.grant.assignment_id)).state).toBe("submitted");
    // The executor (its store) reports the task later: accepted under the same claim.
    expect(await executor.send(executor.receipt(submitted.grant, { kind: "completed", result: { report: "kept" } }))).toMatchObject({ status: "recorded" });
    await executor.send(executor.receipt(running.grant, { kind: "failed", error: { code: "rolled_back", message: "nothing done" } }));
  });

  it("a sweeper finding a settled task still watched (its gateway died before the history entry) appends the entry, once", async () => {
    const { runId, grant } = await confirmed();
    await executor.send(executor.receipt(grant, { kind: "submission", task_ref: "job-heal", status: "queued" }));
    await executor.send(executor.receipt(grant, { kind: "completed", result: { healed: true } }));
    // As a gateway dying right after the completion's compare-and-set would leave it: no entry, the watch still there
    // (the gateway's own sweeper may get to it first: the same code, and the entry is appended once either way).
    const store = await executionStores(nc);
    const runs = await store("runs", RunRecord);
    const assignments = await store("assignments", AssignmentRecord);
    const watchlist = await watchlistOn(nc);
    await runs.mutate(runId, (run) => ({ write: { ...run, task_results: [] }, result: undefined }));
    await watchlist.watch(grant.assignment_id, 0);
    const tasks = new BackgroundTasks(runs, assignments, watchlist, createLogger({ level: "silent" }));
    const a = (await assignments.get(grant.assignment_id))!.value;
    expect(await tasks.checkDeadline(a)).toBe(true);
    expect(await tasks.checkDeadline(a)).toBe(true);
    const history = (await gw.http("GET", `/v1/runs/${runId}/history`)).body;
    expect(history.task_results).toMatchObject([
      { assignment_id: grant.assignment_id, state: "completed", receipt_id: a.final!.receipt_id, context_preview: { result: { healed: true } } },
    ]);
  });

  it("leaves a history the checker finds consistent", async () => {
    const report = checkHistory(await readHistory(nc));
    expect(report.violations).toEqual([]);
    expect(report.counts.task_results).toBeGreaterThanOrEqual(3);
  });
});
