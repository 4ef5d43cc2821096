import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { RECEIPT_CONSUMER, STREAMS } from "../../src/streams/names.js";
import type { Grant } from "../../src/wire/messages.js";
import { receiptId } from "../../src/wire/receipt-ids.js";
import { startExecutionFixture, startExecutionGateway, type ExecutionFixture, type TestGateway } from "../helpers/execution-gateway.js";
import type { ProtocolExecutor } from "../helpers/protocol-executor.js";
import { storedAssignment } from "../helpers/stored-records.js";
import { until } from "../helpers/until.js";
import { processorOnSameBuckets } from "../helpers/receipt-processor.js";
import { encode } from "../../src/wire/codec.js";
import { runningCall as startedCall } from "../helpers/running-call.js";

const SCOPE = "receipt-order";
/** A read and a write tool in the scope, and their executor, heartbeating. */
const FIXTURE = {
  scope: SCOPE,
  agent: "order-bot",
  tools: [
    { name: "tasks.read", binding_id: "b-order", input_schema: { type: "object" } },
    { name: "tasks.write", binding_id: "b-order-write", input_schema: { type: "object" }, tool_kind: "write" as const },
  ],
  executor: { id: "exec-order", start: "heartbeat" },
} satisfies Parameters<typeof startExecutionFixture>[0];

/**
 * Receipts sent ahead of their answers (`Tg-After`, src/wire/receipt-order.ts): the gateway says on
 * its grant that it keeps them in order, and applies a receipt only once the one it names had its
 * turn, whatever order they reach it in.
 */
describe("receipts sent ahead of their answers", () => {
  let fx: ExecutionFixture, gw: TestGateway, nc: NatsConnection, exec: ProtocolExecutor, sessionId: string;
  beforeAll(async () => {
    fx = await startExecutionFixture(FIXTURE);
    ({ gw, nc, executor: exec, sessionId } = fx);
  });
  afterAll(async () => {
    await fx?.close();
  });

  const runningCall = () => startedCall(gw, exec, sessionId, "tasks.read");
  const consumer = async () => (await jetstreamManager(nc)).consumers.info(STREAMS.receipts, RECEIPT_CONSUMER);
  /** The gateway's naks of receipt deliveries, as NATS carries them (a receipt held back is nak'ed with a delay). */
  let naks = 0;
  beforeAll(async () => {
    nc.subscribe(`$JS.ACK.${STREAMS.receipts}.${RECEIPT_CONSUMER}.>`, {
      callback: (_err, m) => {
        if (new TextDecoder().decode(m.data).startsWith("-NAK")) naks++;
      },
    });
    await nc.flush();
  });
  const receipts = (g: Grant) => ({
    progress: exec.claimReceipt(g, { kind: "progress", seq: 1, progress: { step: 1 } }),
    completed: exec.claimReceipt(g, { kind: "completed", result: { ok: true } }),
  });

  it("says so on the claim reply", async () => {
    expect((await runningCall()).ordersReceipts).toBe(true);
  });

  it("applies a final receipt that reached it before the progress report it names after that report", async () => {
    const { grant } = await runningCall();
    const { progress, completed } = receipts(grant);
    const before = (await consumer()).delivered.stream_seq;
    const final = exec.post(completed, 10_000, progress.receipt_id);
    // The gateway has taken the final receipt (and held it back) before the report it names exists.
    await until("the final receipt delivered", async () => ((await consumer()).delivered.stream_seq > before ? true : undefined));
    expect((await exec.post(progress)).status).toBe("recorded");
    expect((await final).status).toBe("recorded");
    const stored = await storedAssignment(nc, grant.assignment_id);
    expect(stored.state).toBe("completed");
    expect(stored.progress_log?.map((p) => p.receipt_id)).toEqual([progress.receipt_id]);
  });

  it("takes receipts sent back to back in their order without holding any back", async () => {
    const { grant } = await runningCall();
    const { progress, completed } = receipts(grant);
    const heldBefore = naks;
    const answers = await Promise.all([exec.post(progress), exec.post(completed, 10_000, progress.receipt_id)]);
    expect(answers.map((a) => a.status)).toEqual(["recorded", "recorded"]);
    expect((await storedAssignment(nc, grant.assignment_id)).progress_log?.map((p) => p.seq)).toEqual([1]);
    await nc.flush();
    expect(naks).toBe(heldBefore);
  });

  it("applies a receipt naming a report of its claim that never comes, after holding it back a while", async () => {
    const { grant } = await runningCall();
    const { completed } = receipts(grant);
    const heldBefore = naks;
    expect((await exec.post(completed, 10_000, receiptId(grant, { kind: "progress", seq: 7 }))).status).toBe("recorded");
    await nc.flush();
    expect(naks - heldBefore).toBeGreaterThan(1);
  });

  it("never holds back a receipt naming anything but a report of its own claim", async () => {
    const { grant } = await runningCall();
    const { completed } = receipts(grant);
    const other = await runningCall();
    const heldBefore = naks;
    // Another claim's report (its token, not this one's), and an id of no claim at all.
    const [first, second] = [receiptId(other.grant, { kind: "progress", seq: 1 }), `${grant.assignment_id}_g0_p1_forged`];
    expect((await exec.post(completed, 10_000, first)).status).toBe("recorded");
    const again = exec.claimReceipt(other.grant, { kind: "completed", result: { ok: true } });
    expect((await exec.post(again, 10_000, second)).status).toBe("recorded");
    await nc.flush();
    expect(naks).toBe(heldBefore);
  });

  /** A new call of `toolName`, claimed and granted, its `accepted` not sent yet. */
  async function grantedCall(toolName: string): Promise<Grant> {
    const run = await gw.api("POST", `/v1/sessions/${sessionId}/runs`);
    const call = await gw.api("POST", `/v1/runs/${run.run_id}/tool-calls`, { tool_name: toolName, arguments: {} });
    const id: string = call.assignment.assignment_id;
    const { reply } = await exec.claimWithOrder(id, (await exec.pullFor(id)).generation);
    if (reply.status !== "granted") throw new Error(`claim refused: ${reply.code}`);
    return reply.grant;
  }

  it("holds a read's receipts sent ahead of its accepted until accepted had its turn", async () => {
    const grant = await grantedCall("tasks.read");
    const accepted = exec.accepted(grant, receiptId(grant, { kind: "accepted" }));
    const { progress, completed } = receipts(grant);
    const before = (await consumer()).delivered.stream_seq;
    // The report and the final receipt reach the gateway first, the report naming `accepted`.
    const answers = [exec.post(progress, 10_000, accepted.receipt_id), exec.post(completed, 10_000, progress.receipt_id)];
    await until("both delivered", async () => ((await consumer()).delivered.stream_seq >= before + 2 ? true : undefined));
    expect((await storedAssignment(nc, grant.assignment_id)).state).toBe("claimed");
    expect((await exec.post(accepted)).status).toBe("recorded");
    expect((await Promise.all(answers)).map((a) => a.status)).toEqual(["recorded", "recorded"]);
    const stored = await storedAssignment(nc, grant.assignment_id);
    expect(stored.state).toBe("completed");
    expect(stored.progress_log?.map((p) => p.receipt_id)).toEqual([progress.receipt_id]);
  });

  it("takes at once a write's receipt naming its unanswered accepted: a write waits for the confirmation", async () => {
    const grant = await grantedCall("tasks.write");
    const accepted = exec.accepted(grant, receiptId(grant, { kind: "accepted" }));
    const { progress } = receipts(grant);
    const heldBefore = naks;
    const early = await exec.post(progress, 10_000, accepted.receipt_id);
    expect(early.status).not.toBe("recorded");
    await nc.flush();
    expect(naks).toBe(heldBefore);
    expect((await exec.post(accepted)).status).toBe("recorded");
  });

  it("keeps a claim's receipts in order when two replicas take them", async () => {
    const second = await startExecutionGateway(fx.nats.url);
    try {
      const calls = await Promise.all(Array.from({ length: 40 }, () => runningCall()));
      await Promise.all(
        calls.map(async ({ grant }) => {
          const { progress, completed } = receipts(grant);
          const answers = await Promise.all([exec.post(progress), exec.post(completed, 10_000, progress.receipt_id)]);
          expect(answers.map((a) => a.status)).toEqual(["recorded", "recorded"]);
        }),
      );
      for (const { grant } of calls) {
        const stored = await storedAssignment(nc, grant.assignment_id);
        expect(stored.state).toBe("completed");
        expect(stored.progress_log?.map((p) => p.seq)).toEqual([1]);
      }
    } finally {
      await second.close();
    }
  });
});

/**
 * The look-again (`receiptLookAgainMs`): a final receipt whose named report another replica is
 * applying at that moment is not held back. Its waits are long here, so that the other replica
 * applies the report inside them on any machine, and the first look is seen to miss it.
 */
describe("a receipt whose named report another replica applies meanwhile", () => {
  const LOOK_AGAIN_MS = [250, 500, 1_000, 2_000];
  let fx: ExecutionFixture, nc: NatsConnection, exec: ProtocolExecutor;
  beforeAll(async () => {
    fx = await startExecutionFixture({ ...FIXTURE, execution: { receiptLookAgainMs: LOOK_AGAIN_MS } });
    ({ nc, executor: exec } = fx);
  });
  afterAll(async () => {
    await fx?.close();
  });

  it("is applied once that report is, without being held back", async () => {
    const { grant } = await startedCall(fx.gw, exec, fx.sessionId, "tasks.read");
    const progress = exec.claimReceipt(grant, { kind: "progress", seq: 1, progress: { step: 1 } });
    const completed = exec.claimReceipt(grant, { kind: "completed", result: { ok: true } });
    const wire = { naks: 0, looks: 0 };
    const id = Buffer.from(grant.assignment_id);
    const holds = (data: Uint8Array) => Buffer.from(data).includes(id);
    nc.subscribe(`$JS.ACK.${STREAMS.receipts}.${RECEIPT_CONSUMER}.>`, { callback: (_err, m) => void (m.string().startsWith("-NAK") && wire.naks++) });
    // The gateway's reads of the assignment: each look for the report is one.
    nc.subscribe("$JS.API.DIRECT.GET.KV_tg_assignments.>", {
      callback: (_err, m) => void ((m.subject.endsWith(grant.assignment_id) || holds(m.data)) && wire.looks++),
    });
    nc.subscribe("$JS.API.DIRECT.GET.KV_tg_assignments", { callback: (_err, m) => void (holds(m.data) && wire.looks++) });
    await nc.flush();

    const final = exec.post(completed, 10_000, progress.receipt_id);
    await until("the gateway looked for the report and missed it", () => (wire.looks > 0 ? true : undefined));
    // Another replica takes the report off the stream and applies it (it is in the stream, as it would be).
    const other = await processorOnSameBuckets(nc);
    const stored = await jetstream(nc).publish(`tg.rcpt.${SCOPE}.exec-order.${grant.assignment_id}`, encode(progress), { msgID: progress.receipt_id });
    const input = {
      scope: SCOPE,
      subjectExecutorId: "exec-order",
      subjectAssignmentId: grant.assignment_id,
      receipt: progress,
      streamSeq: stored.seq,
      msgId: progress.receipt_id,
      redelivered: false,
    };
    expect((await other.process(input)).status).toBe("recorded");

    expect((await final).status).toBe("recorded");
    const record = await storedAssignment(nc, grant.assignment_id);
    expect(record.state).toBe("completed");
    expect(record.progress_log?.map((p) => p.receipt_id)).toEqual([progress.receipt_id]);
    await nc.flush();
    expect(wire.naks).toBe(0);
  });
});
