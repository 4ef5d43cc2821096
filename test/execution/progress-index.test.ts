import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NatsConnection } from "@nats-io/transport-node";
import { checkHistory, readHistory } from "../../src/checker/index.js";
import type { ReceiptInput } from "../../src/execution/receipts/receipt-processor.js";
import type { Grant, Receipt } from "../../src/wire/messages.js";
import { progressIdPlace, receiptId } from "../../src/wire/receipt-ids.js";
import { startExecutionFixture, startExecutionGateway, type ExecutionFixture, type TestGateway } from "../helpers/execution-gateway.js";
import type { ProtocolExecutor } from "../helpers/protocol-executor.js";
import { processorOnSameBuckets } from "../helpers/receipt-processor.js";
import { receiptIndexed, storedProgressEntry } from "../helpers/stored-records.js";

const SCOPE = "progress-index";

/**
 * Store layout 3 (a gateway started with `TOOLGATE_STORE_LAYOUT=3`; layout 4 carries progress in the
 * assignment record instead, test/execution/progress-in-record.test.ts): a progress receipt under
 * the id bound to its claim is indexed by its own progress entry (the id names the entry's key), not
 * by an entry of the receipt index. Every answer the index gave stays the same: a resend, a
 * conflict, a query, a redelivery; a gateway of layout 2 writes the index entry as before and reads
 * both.
 */
describe("progress entries as their receipts' index entries", () => {
  let fx: ExecutionFixture, gw: TestGateway, nc: NatsConnection, exec: ProtocolExecutor, sessionId: string;
  beforeAll(async () => {
    fx = await startExecutionFixture({
      scope: SCOPE,
      agent: "progress-bot",
      tools: [{ name: "tasks.read", binding_id: "b-progress", input_schema: { type: "object" } }],
      executor: { id: "exec-progress", start: "heartbeat" },
      execution: { storeLayout: 3 },
    });
    ({ gw, nc, executor: exec, sessionId } = fx);
  });
  afterAll(async () => {
    if (gw !== fx?.gw) await gw?.close();
    await fx?.close();
  });

  /** A new tool call through `via`, claimed and confirmed: its grant. */
  const runningCall = async (via: TestGateway = gw): Promise<Grant> => {
    const run = await via.api("POST", `/v1/sessions/${sessionId}/runs`);
    const call = await via.api("POST", `/v1/runs/${run.run_id}/tool-calls`, { tool_name: "tasks.read", arguments: {} });
    const id: string = call.assignment.assignment_id;
    const reply = await exec.claim(id, (await exec.pullFor(id)).generation);
    if (reply.status !== "granted") throw new Error(`claim refused: ${reply.code}`);
    expect((await exec.post(exec.accepted(reply.grant, receiptId(reply.grant, { kind: "accepted" })))).status).toBe("recorded");
    return reply.grant;
  };
  const progressEntry = (assignmentId: string, seq: number) => storedProgressEntry(nc, assignmentId, seq);
  const complete = async (g: Grant) => expect((await exec.post(exec.claimReceipt(g, { kind: "completed", result: {} }))).status).toBe("recorded");
  const indexEntryExists = (id: string) => receiptIndexed(nc, id);

  it("stores no index entry for progress under its claim-bound id, and answers resends, conflicts and queries from the progress entry", async () => {
    const g = await runningCall();
    const progress = exec.claimReceipt(g, { kind: "progress", seq: 1, progress: { step: "one" } });
    expect(progressIdPlace(progress.receipt_id)).toEqual({ assignment_id: g.assignment_id, seq: 1 });
    expect((await exec.post(progress)).status).toBe("recorded");

    const stored = await progressEntry(g.assignment_id, 1);
    expect(stored).toMatchObject({ receipt_id: progress.receipt_id, progress: { step: "one" }, indexed: { executor_id: exec.executorId } });
    expect(await indexEntryExists(progress.receipt_id)).toBe(false);

    // Inside the stream's window the resend is dropped and the stored answer asked for (`tg.rq`).
    expect(await exec.send({ ...progress, replayed: true })).toMatchObject({ status: "recorded" });
    // Past it (another Nats-Msg-Id), the progress entry answers as the index would.
    expect(await exec.send({ ...progress, replayed: true }, `${progress.receipt_id}-later`)).toMatchObject({ status: "duplicate" });
    expect(await exec.send({ ...progress, progress: { step: "other" } } as Receipt, `${progress.receipt_id}-other`)).toMatchObject({
      status: "rejected",
      code: "receipt_conflict",
    });
    expect(await exec.query({ ...progress, progress: { step: "other" } } as Receipt)).toMatchObject({ status: "rejected", code: "receipt_conflict" });
    // The id used for another kind of receipt of the same claim is a conflict too.
    const reused = exec.receipt(g, { kind: "completed", result: { done: true } }, progress.receipt_id);
    expect(await exec.send(reused, `${progress.receipt_id}-completed`)).toMatchObject({ status: "rejected", code: "receipt_conflict" });
    expect(await exec.query(progress)).toMatchObject({ status: "recorded" });

    // The entry kept what it was stored with; nothing was indexed for the refused ones under its id.
    expect(await progressEntry(g.assignment_id, 1)).toEqual(stored);
    expect(await indexEntryExists(progress.receipt_id)).toBe(false);
    await complete(g);
  });

  it("indexes progress under any other id as before: a free-form id, the id of another seq, a forged one", async () => {
    const g = await runningCall();
    const freeForm = exec.receipt(g, { kind: "progress", seq: 1, progress: {} });
    const ofAnotherSeq = { ...exec.claimReceipt(g, { kind: "progress", seq: 2, progress: {} }), seq: 3 } as Receipt;
    for (const r of [freeForm, ofAnotherSeq]) {
      expect((await exec.post(r)).status).toBe("recorded");
      expect(await indexEntryExists(r.receipt_id)).toBe(true);
    }
    expect((await progressEntry(g.assignment_id, 1))?.indexed).toBeUndefined();
    expect((await progressEntry(g.assignment_id, 3))?.indexed).toBeUndefined();
    // An id that looks claim-bound but is not this claim's (a forged tag) is not found from its form alone.
    const lookalike = exec.receipt(g, { kind: "progress", seq: 4, progress: {} }, `${g.assignment_id}_g${g.generation}_p4_${"A".repeat(22)}`);
    expect((await exec.post(lookalike)).status).toBe("recorded");
    expect(await indexEntryExists(lookalike.receipt_id)).toBe(true);
    expect((await progressEntry(g.assignment_id, 4))?.indexed).toBeUndefined();
    await complete(g);
  });

  it("answers a redelivered progress message as it did the first time", async () => {
    const g = await runningCall();
    const progress = exec.claimReceipt(g, { kind: "progress", seq: 1, progress: { n: 1 } });
    expect((await exec.post(progress)).status).toBe("recorded");
    const streamSeq = (await progressEntry(g.assignment_id, 1))!.indexed!.stream_seq;
    // Another gateway gets the same message again (its ack was lost), and then another message under the id.
    const processor = await processorOnSameBuckets(nc, { layout: 3 });
    const input = (seq: number): ReceiptInput => ({
      scope: SCOPE,
      subjectExecutorId: exec.executorId,
      subjectAssignmentId: g.assignment_id,
      receipt: progress,
      streamSeq: seq,
      msgId: progress.receipt_id,
      redelivered: true,
    });
    expect(await processor.process(input(streamSeq))).toMatchObject({ status: "recorded" });
    expect(await processor.process(input(streamSeq + 1_000_000))).toMatchObject({ status: "duplicate" });
    expect(await indexEntryExists(progress.receipt_id)).toBe(false);
    await complete(g);
  });

  it("a gateway of layout 2 indexes it as before, and both read what the other wrote; the checker accepts both", async () => {
    const second = await startExecutionGateway(fx.nats.url, { storeLayout: 2 });
    await fx.gw.close();
    gw = second;
    const g = await runningCall();
    const progress = exec.claimReceipt(g, { kind: "progress", seq: 1, progress: { layout: 2 } });
    expect((await exec.post(progress)).status).toBe("recorded");
    expect(await indexEntryExists(progress.receipt_id)).toBe(true);
    expect((await progressEntry(g.assignment_id, 1))?.indexed).toBeUndefined();
    expect(await exec.send({ ...progress, replayed: true }, `${progress.receipt_id}-later`)).toMatchObject({ status: "duplicate" });
    await complete(g);

    // What layout 3 wrote (the first test's call) is answered by this gateway from the progress entry.
    const report = checkHistory(await readHistory(nc));
    expect(report.violations).toEqual([]);
    expect(report.counts.indexed_by_progress).toBeGreaterThanOrEqual(2);
    const indexedByProgress = (await readHistory(nc)).progress.find((p) => p.indexed)!;
    const answer = await exec.query({
      receipt_id: indexedByProgress.receipt_id,
      assignment_id: indexedByProgress.assignment_id,
      executor_id: exec.executorId,
      claim_token: "unused",
      kind: "progress",
      seq: indexedByProgress.seq,
      progress: indexedByProgress.progress,
    } as Receipt);
    expect(answer).toMatchObject({ status: "recorded" });
  });
});
