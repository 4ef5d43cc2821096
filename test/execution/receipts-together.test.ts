import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NatsConnection } from "@nats-io/transport-node";
import { RunEventMessage, type RunEvent } from "../../src/execution/events/run-events.js";
import { STORED_MAX_JSON_DEPTH } from "../../src/validation/json-depth.js";
import { decode } from "../../src/wire/codec.js";
import type { Grant, Receipt, ReceiptAnswer } from "../../src/wire/messages.js";
import { ADMIN_KEY, startExecutionFixture, startExecutionGateway, type ExecutionFixture, type TestGateway } from "../helpers/execution-gateway.js";
import { ProtocolExecutor } from "../helpers/protocol-executor.js";
import { runningCall } from "../helpers/running-call.js";
import { SseClient } from "../helpers/sse-client.js";
import { receiptId } from "../../src/wire/receipt-ids.js";
import { storedAssignment, storedProgressEntry } from "../helpers/stored-records.js";

const SCOPE = "receipts-together";

/**
 * A progress report and the final receipt sent right behind it (`Tg-After`) that reach a gateway
 * together are applied by one compare-and-set of the assignment, and answered in one message to an
 * executor that asked for it (`Tg-Answers: joint`); so is a read's `accepted` with what the read sent
 * behind it (its answer in a message of its own). The receipts are published while no gateway runs,
 * so the next one takes them in one delivery, as a busy gateway does.
 */
describe("receipts sent back to back, taken together", () => {
  let fx: ExecutionFixture, nc: NatsConnection, exec: ProtocolExecutor, sessionId: string;
  /** Per assignment, its record's writes as NATS carries them. */
  const writes = new Map<string, number>();
  /** Per run, its events in the order published. */
  const events = new Map<string, RunEvent[]>();
  /** Per run, its event messages, each the events of one write (store layout 5). */
  const eventMessages = new Map<string, RunEvent[][]>();
  beforeAll(async () => {
    fx = await startExecutionFixture({
      scope: SCOPE,
      agent: "together-bot",
      tools: [
        { name: "tasks.read", binding_id: "b-together", input_schema: { type: "object" } },
        { name: "tasks.write", binding_id: "b-together-write", input_schema: { type: "object" }, tool_kind: "write" },
      ],
      executor: { id: "exec-together", start: "heartbeat" },
    });
    ({ nc, executor: exec, sessionId } = fx);
    nc.subscribe("$KV.tg_assignments.>", {
      callback: (_err, m) => {
        const id = m.subject.split(".")[2]!;
        writes.set(id, (writes.get(id) ?? 0) + 1);
      },
    });
    nc.subscribe("tg.evt.>", {
      callback: (_err, m) => {
        const message = decode(RunEventMessage, m.data, STORED_MAX_JSON_DEPTH);
        const held = Array.isArray(message) ? message : [message];
        const runId = held[0]!.run_id;
        events.set(runId, [...(events.get(runId) ?? []), ...held]);
        eventMessages.set(runId, [...(eventMessages.get(runId) ?? []), held]);
      },
    });
    await nc.flush();
  });
  afterAll(async () => {
    await gateway?.close();
    await fx?.close();
  });

  /** Running calls made on the fixture's gateway, which then stops: what is published next waits in the stream. */
  let gateway: TestGateway;
  const callsWhileStopped = async (n: number) => {
    const calls = [];
    for (let i = 0; i < n; i++) calls.push(await runningCall(gateway, exec, sessionId, "tasks.read"));
    await gateway.close();
    return calls;
  };
  const receipts = (g: Grant, seq = 1) => ({
    progress: exec.claimReceipt(g, { kind: "progress", seq, progress: { step: seq } }),
    completed: exec.claimReceipt(g, { kind: "completed", result: { ok: true } }),
  });
  /**
   * A running call's report and final receipt (asking for joint answers), published while no gateway
   * runs; then a gateway of `options` starts and takes them together.
   */
  const reportAndFinalWhileStopped = async (options: Parameters<typeof startExecutionGateway>[1] = {}) => {
    const { grant, runId } = await runningCall(gateway, exec, sessionId, "tasks.read");
    await gateway.close();
    const { progress, completed } = receipts(grant);
    const answers = Promise.all([exec.post(progress), exec.post(completed, 10_000, progress.receipt_id, { jointAnswers: true })]);
    await nc.flush();
    gateway = await startExecutionGateway(fx.nats.url, options);
    return { grant, runId, answers };
  };
  const messagesHolding = (id: string) => exec.answerMessages.filter((m) => m.some((a: ReceiptAnswer) => a.receipt_id === id));

  it("applies both in one write, tells the report before the settlement, and answers both in one message when asked", async () => {
    gateway = fx.gw;
    const [joint, separate] = await callsWhileStopped(2);
    const writesBefore = new Map(writes);
    const sent = [joint!, separate!].map(({ grant }, i) => {
      const { progress, completed } = receipts(grant);
      return {
        grant,
        progress,
        completed,
        answers: Promise.all([exec.post(progress), exec.post(completed, 10_000, progress.receipt_id, { jointAnswers: i === 0 })]),
      };
    });
    await nc.flush();
    gateway = await startExecutionGateway(fx.nats.url);
    for (const { grant, progress, completed, answers } of sent) {
      expect((await answers).map((a) => a.status)).toEqual(["recorded", "recorded"]);
      const stored = await storedAssignment(nc, grant.assignment_id);
      expect(stored.state).toBe("completed");
      expect(stored.progress_log?.map((p) => p.receipt_id)).toEqual([progress.receipt_id]);
      expect(stored.final?.receipt_id).toBe(completed.receipt_id);
      expect(stored.projection).toBeDefined();
      expect((writes.get(grant.assignment_id) ?? 0) - (writesBefore.get(grant.assignment_id) ?? 0)).toBe(1);
    }
    await nc.flush();
    for (const { runId } of [joint!, separate!]) {
      const told = (events.get(runId) ?? []).map((e) => (e.type === "assignment" ? `${e.type}:${e.to}` : e.type));
      expect(told.slice(-2)).toEqual(["progress", "assignment:completed"]);
      // One write, one event message: the report and the settlement travel together.
      expect(
        eventMessages
          .get(runId)
          ?.at(-1)
          ?.map((e) => e.type),
      ).toEqual(["progress", "assignment"]);
    }
    const [jointSent, separateSent] = sent;
    expect(messagesHolding(jointSent!.progress.receipt_id)).toEqual([
      [expect.objectContaining({ receipt_id: jointSent!.progress.receipt_id }), expect.objectContaining({ receipt_id: jointSent!.completed.receipt_id })],
    ]);
    expect(messagesHolding(separateSent!.progress.receipt_id)).toHaveLength(1);
    expect(messagesHolding(separateSent!.progress.receipt_id)[0]).toHaveLength(1);
    expect(messagesHolding(separateSent!.completed.receipt_id)).toHaveLength(1);
  });

  /** A new call of `toolName` on the current gateway, claimed and granted, its `accepted` not sent yet. */
  const grantedCall = async (toolName: string) => {
    const run = await gateway.api("POST", `/v1/sessions/${sessionId}/runs`);
    const call = await gateway.api("POST", `/v1/runs/${run.run_id}/tool-calls`, { tool_name: toolName, arguments: {} });
    const id: string = call.assignment.assignment_id;
    const { reply } = await exec.claimWithOrder(id, (await exec.pullFor(id)).generation);
    if (reply.status !== "granted") throw new Error(`claim refused: ${reply.code}`);
    return { grant: reply.grant, runId: run.run_id as string };
  };

  /**
   * A new granted read whose `accepted`, report and final receipt are published back to back while no
   * gateway runs (the report asking for joint answers when `reportJoint`, the final receipt always);
   * then a gateway starts and takes them.
   */
  const readSentBackToBackWhileStopped = async (reportJoint: boolean) => {
    const { grant, runId } = await grantedCall("tasks.read");
    // Counted once stopped: a stopping gateway publishes the run events it left in the record, a write.
    await gateway.close();
    const writesBefore = writes.get(grant.assignment_id) ?? 0;
    const accepted = exec.accepted(grant, receiptId(grant, { kind: "accepted" }));
    const { progress, completed } = receipts(grant);
    const answers = Promise.all([
      exec.post(accepted),
      exec.post(progress, 10_000, accepted.receipt_id, { jointAnswers: reportJoint }),
      exec.post(completed, 10_000, progress.receipt_id, { jointAnswers: true }),
    ]);
    await nc.flush();
    gateway = await startExecutionGateway(fx.nats.url);
    return { grant, runId, writesBefore, accepted, progress, completed, answers };
  };

  it("applies a read's accepted, report and final receipt sent back to back in one write, telling each step, and answers them in one message", async () => {
    const { grant, runId, writesBefore, accepted, progress, completed, answers } = await readSentBackToBackWhileStopped(true);
    expect((await answers).map((a) => a.status)).toEqual(["recorded", "recorded", "recorded"]);
    const stored = await storedAssignment(nc, grant.assignment_id);
    expect(stored).toMatchObject({ state: "completed", accepted: { receipt_id: accepted.receipt_id }, final: { receipt_id: completed.receipt_id } });
    expect(stored.progress_log?.map((p) => p.receipt_id)).toEqual([progress.receipt_id]);
    expect(stored.projection).toBeDefined();
    expect((writes.get(grant.assignment_id) ?? 0) - writesBefore).toBe(1);
    await nc.flush();
    // One event message, telling what the three writes one at a time would have told.
    expect(
      eventMessages
        .get(runId)
        ?.at(-1)
        ?.map((e) => (e.type === "assignment" ? `${e.from}>${e.to}` : e.type)),
    ).toEqual(["claimed>running", "progress", "running>completed"]);
    // Each one sent behind another asked for joint answers: the three answers in one message, in order.
    expect(messagesHolding(accepted.receipt_id)).toEqual([
      [accepted, progress, completed].map((r) => expect.objectContaining({ receipt_id: r.receipt_id, status: "recorded" })),
    ]);
  });

  it("answers accepted in a message of its own when the report behind it does not ask for joint answers", async () => {
    const { accepted, progress, completed, answers } = await readSentBackToBackWhileStopped(false);
    expect((await answers).map((a) => a.status)).toEqual(["recorded", "recorded", "recorded"]);
    expect(messagesHolding(accepted.receipt_id)).toEqual([[expect.objectContaining({ receipt_id: accepted.receipt_id })]]);
    expect(messagesHolding(progress.receipt_id)).toEqual([
      [expect.objectContaining({ receipt_id: progress.receipt_id }), expect.objectContaining({ receipt_id: completed.receipt_id })],
    ]);
  });

  /**
   * A new granted call of `toolName` whose `accepted` (as `tweak` makes it) and final receipt right
   * behind it are published while no gateway runs; then a gateway starts and takes them.
   */
  const acceptedAndFinalWhileStopped = async (toolName: string, tweak = (r: Receipt) => r) => {
    const { grant, runId } = await grantedCall(toolName);
    // Counted once stopped: a stopping gateway publishes the run events it left in the record, a write.
    await gateway.close();
    const writesBefore = writes.get(grant.assignment_id) ?? 0;
    const accepted = tweak(exec.accepted(grant, receiptId(grant, { kind: "accepted" })));
    const { completed } = receipts(grant);
    const answers = Promise.all([exec.post(accepted), exec.post(completed, 10_000, accepted.receipt_id, { jointAnswers: true })]);
    await nc.flush();
    gateway = await startExecutionGateway(fx.nats.url);
    return { grant, runId, accepted, completed, answers, writes: () => (writes.get(grant.assignment_id) ?? 0) - writesBefore };
  };

  it("applies a read's accepted and the final receipt right behind it in one write", async () => {
    const { grant, accepted, completed, answers, writes: written } = await acceptedAndFinalWhileStopped("tasks.read");
    expect((await answers).map((a) => a.status)).toEqual(["recorded", "recorded"]);
    expect(await storedAssignment(nc, grant.assignment_id)).toMatchObject({ state: "completed", accepted: { receipt_id: accepted.receipt_id } });
    expect(written()).toBe(1);
    expect(messagesHolding(accepted.receipt_id)).toEqual([
      [expect.objectContaining({ receipt_id: accepted.receipt_id }), expect.objectContaining({ receipt_id: completed.receipt_id })],
    ]);
  });

  it("applies a write's accepted on its own, and what follows it in its turn", async () => {
    const { runId, answers, writes: written } = await acceptedAndFinalWhileStopped("tasks.write");
    expect((await answers).map((a) => a.status)).toEqual(["recorded", "recorded"]);
    expect(written()).toBe(2);
    await nc.flush();
    expect(
      eventMessages
        .get(runId)
        ?.slice(-2)
        .map((m) => m.map((e) => (e.type === "assignment" ? `${e.from}>${e.to}` : e.type))),
    ).toEqual([["claimed>running"], ["running>completed"]]);
  });

  it("applies a read's accepted on its own when it is refused, and refuses what was sent behind it", async () => {
    // Names other arguments: the executor must not start, and nothing behind it is applied.
    const { grant, answers } = await acceptedAndFinalWhileStopped("tasks.read", (r) => ({ ...r, argument_digest: "0".repeat(64) }) as Receipt);
    const [acceptedAnswer, final] = await answers;
    expect(acceptedAnswer).toMatchObject({ status: "rejected", code: "argument_digest_mismatch" });
    expect(final!.status).toBe("rejected");
    const stored = await storedAssignment(nc, grant.assignment_id);
    expect(stored.state).toBe("claimed");
    expect(stored.accepted).toBeNull();
  });

  it("streams the events of that one write as SSE: the settlement carries the id, a resume from before it reads both again", async () => {
    const { runId, answers } = await reportAndFinalWhileStopped();
    await answers;
    const open = async (lastEventId: number) => {
      const client = await SseClient.open(`${gateway.baseUrl}/v1/runs/${runId}/events`, {
        authorization: `Bearer ${ADMIN_KEY}`,
        "last-event-id": String(lastEventId),
      });
      const settled = (e: SseClient["events"]) => e.some((x) => x.data.type === "assignment" && x.data.to === "completed");
      const read = await client.until("the settlement", settled);
      await client.close();
      return read.map((e) => ({ type: e.data.type === "assignment" ? e.data.to : e.data.type, id: e.id, ownId: e.ownId }));
    };
    const all = await open(0);
    const [beforeWrite, report, settlement] = all.slice(-3);
    expect([report?.type, settlement?.type]).toEqual(["progress", "completed"]);
    // The report carries no id of its own (a browser keeps the id before it); the settlement, its message's.
    expect(report).toEqual({ type: "progress", id: beforeWrite!.id, ownId: false });
    expect(settlement!.ownId).toBe(true);
    expect(settlement!.id).toBeGreaterThan(beforeWrite!.id);
    // Resumed after the id the report left a client with: the whole write again, nothing before it.
    expect(await open(report!.id)).toEqual([
      { type: "progress", id: report!.id, ownId: false },
      { type: "completed", id: settlement!.id, ownId: true },
    ]);
  });

  it("publishes them as two event messages under store layout 4, which releases of that layout read", async () => {
    const { grant, runId, answers } = await reportAndFinalWhileStopped({ storeLayout: 4 });
    expect((await answers).map((a) => a.status)).toEqual(["recorded", "recorded"]);
    expect((await storedAssignment(nc, grant.assignment_id)).state).toBe("completed");
    await nc.flush();
    expect(
      eventMessages
        .get(runId)
        ?.slice(-2)
        .map((m) => m.map((e) => e.type)),
    ).toEqual([["progress"], ["assignment"]]);
    await gateway.close();
    gateway = await startExecutionGateway(fx.nats.url);
  });

  it("never takes a final receipt from another executor with the report, whatever token it presents", async () => {
    const { grant } = await runningCall(gateway, exec, sessionId, "tasks.read");
    const other = new ProtocolExecutor(nc, SCOPE, "exec-together-other", ["b-together"], { register: false });
    try {
      await gateway.close();
      const { progress } = receipts(grant);
      // The other executor holds the claim's token (leaked, say) and names the report from its own subject.
      const forged = other.claimReceipt(grant, { kind: "completed", result: { forged: true } });
      const answers = Promise.all([exec.post(progress), other.post(forged, 10_000, progress.receipt_id)]);
      await nc.flush();
      gateway = await startExecutionGateway(fx.nats.url);
      const [report, final] = await answers;
      expect(report.status).toBe("recorded");
      expect(final).toMatchObject({ status: "rejected", code: "invalid_token" });
      const stored = await storedAssignment(nc, grant.assignment_id);
      expect(stored.state).toBe("running");
      expect(stored.progress_log?.map((p) => p.receipt_id)).toEqual([progress.receipt_id]);
    } finally {
      other.close();
    }
  });

  it("applies them one by one when the record has no room for the report, in order", async () => {
    const { grant, runId } = await runningCall(gateway, exec, sessionId, "tasks.read");
    // The record carries 16 reports; the 17th goes to the progress bucket, on its own.
    for (let seq = 1; seq <= 16; seq++) expect((await exec.post(receipts(grant, seq).progress)).status).toBe("recorded");
    await gateway.close();
    const { progress, completed } = receipts(grant, 17);
    const answers = Promise.all([exec.post(progress), exec.post(completed, 10_000, progress.receipt_id)]);
    await nc.flush();
    gateway = await startExecutionGateway(fx.nats.url);
    expect((await answers).map((a) => a.status)).toEqual(["recorded", "recorded"]);
    const stored = await storedAssignment(nc, grant.assignment_id);
    expect(stored.state).toBe("completed");
    expect(stored.progress_log).toHaveLength(16);
    expect((await storedProgressEntry(nc, grant.assignment_id, 17))?.receipt_id).toBe(progress.receipt_id);
    await nc.flush();
    const told = (events.get(runId) ?? []).map((e) => (e.type === "progress" ? `progress:${e.seq}` : e.type === "assignment" ? e.to : e.type));
    expect(told.slice(-2)).toEqual(["progress:17", "completed"]);
    // Two writes (the report's entry, then the settlement): two event messages.
    expect(
      eventMessages
        .get(runId)
        ?.slice(-2)
        .map((m) => m.length),
    ).toEqual([1, 1]);
    expect(messagesHolding(progress.receipt_id)).toEqual([[expect.objectContaining({ receipt_id: progress.receipt_id })]]);
  });
});
