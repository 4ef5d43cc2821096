import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { headers, type NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { checkHistory, readHistory } from "../../src/checker/index.js";
import { STREAMS } from "../../src/streams/names.js";
import type { Grant, Receipt } from "../../src/wire/messages.js";
import { receiptId } from "../../src/wire/receipt-ids.js";
import { subjects } from "../../src/wire/subjects.js";
import { startExecutionFixture, type ExecutionFixture, type TestGateway } from "../helpers/execution-gateway.js";
import type { ProtocolExecutor } from "../helpers/protocol-executor.js";
import { receiptIndexLookups } from "../helpers/receipt-lookups.js";
import { processorOnSameBuckets } from "../helpers/receipt-processor.js";
import { receiptIndexed, storedAssignment } from "../helpers/stored-records.js";

const SCOPE = "chains";

/**
 * A read's `accepted`, progress report and final receipt sent as one message of the receipts stream
 * (a chain): one stored message, one compare-and-set, one answer message, no receipt index read. A
 * chain the gateway cannot apply whole stores nothing of its receipts but the first: the others are
 * answered `pending` and decided when sent alone, as if the chain had never carried them. A chain
 * delivered again is answered as the first time.
 */
describe("receipt chains", () => {
  let fx: ExecutionFixture, gw: TestGateway, nc: NatsConnection, exec: ProtocolExecutor, sessionId: string;
  /** Answer messages this executor received. */
  let answerMessages = 0;
  beforeAll(async () => {
    fx = await startExecutionFixture({
      scope: SCOPE,
      agent: "chain-bot",
      tools: [
        { name: "tasks.read", binding_id: "b-chain", input_schema: { type: "object" } },
        { name: "tasks.write", binding_id: "b-chain-write", input_schema: { type: "object" }, tool_kind: "write" },
      ],
      executor: { id: "exec-chain", start: "heartbeat" },
    });
    ({ gw, nc, executor: exec, sessionId } = fx);
    nc.subscribe(subjects.answers(SCOPE, exec.executorId), { callback: () => void answerMessages++ });
    await nc.flush();
  });
  afterAll(() => fx?.close());

  /** A new call of `toolName`, claimed: its grant, its run, and whether the claim reply offered chains. */
  const claimedCall = async (toolName = "tasks.read"): Promise<{ grant: Grant; runId: string; takesChains: boolean }> => {
    const run = await gw.api("POST", `/v1/sessions/${sessionId}/runs`);
    const call = await gw.api("POST", `/v1/runs/${run.run_id}/tool-calls`, { tool_name: toolName, arguments: { cursor: "a" } });
    const id: string = call.assignment.assignment_id;
    const { reply, takesChains } = await exec.claimWithOrder(id, (await exec.pullFor(id)).generation);
    if (reply.status !== "granted") throw new Error(`claim refused: ${reply.code}`);
    return { grant: reply.grant, runId: run.run_id, takesChains };
  };
  /** A call's three receipts under their claim-bound ids, as the ToolRunner sends a read's. */
  const threeReceipts = (g: Grant, argumentDigest = g.argument_digest): [Receipt, Receipt, Receipt] => [
    exec.receipt(g, { kind: "accepted", operation_key: g.operation_key, argument_digest: argumentDigest }, receiptId(g, { kind: "accepted" })),
    exec.claimReceipt(g, { kind: "progress", seq: 1, progress: { page: 1 } }),
    exec.claimReceipt(g, { kind: "completed", result: { tasks: ["t-1"] } }),
  ];
  const lastSeq = async () => (await (await jetstreamManager(nc)).streams.info(STREAMS.receipts)).state.last_seq;
  const lookups = () => receiptIndexLookups(gw.baseUrl);
  const indexed = (id: string) => receiptIndexed(nc, id);
  /**
   * The chain's message handed again, as a redelivery after a crash before its ack, to another
   * gateway's processor on the same buckets; `streamSeq` is the message's, as the record stored it.
   */
  const redeliver = async (chain: readonly Receipt[], streamSeq: number) => {
    const processor = await processorOnSameBuckets(nc);
    const message = { scope: SCOPE, subjectExecutorId: exec.executorId, msgId: chain[0]!.receipt_id, firstOnSubject: true, streamSeq, redelivered: true };
    return processor.processChain(chain.map((receipt) => ({ ...message, subjectAssignmentId: receipt.assignment_id, receipt })));
  };

  it("applies a read's chain with one stored message and one answer message, and answers its receipts sent alone afterwards as stored", async () => {
    const { grant: g, takesChains } = await claimedCall();
    expect(takesChains).toBe(true);
    const chain = threeReceipts(g);
    const [seqBefore, lookupsBefore, answersBefore] = [await lastSeq(), await lookups(), answerMessages];
    const answers = await exec.postChain(chain);
    expect(answers.map((a) => a.status)).toEqual(["recorded", "recorded", "recorded"]);
    expect(await lastSeq()).toBe(seqBefore + 1);
    expect(await lookups()).toEqual({ read: lookupsBefore.read, skipped: lookupsBefore.skipped + 3 });
    await nc.flush();
    expect(answerMessages - answersBefore).toBe(1);
    const done = await gw.api("GET", `/v1/assignments/${g.assignment_id}`);
    expect(done.state).toBe("completed");
    expect(done.progress).toEqual([expect.objectContaining({ seq: 1, progress: { page: 1 } })]);
    expect(done.context_preview.result).toEqual({ tasks: ["t-1"] });

    // The first one alone is dropped by the stream (the chain's id is its id); the others, stored
    // alone, are decided on the record that applied them: the same body a duplicate, another a conflict.
    const [accepted, progress, completed] = chain;
    expect(await exec.send({ ...accepted, replayed: true })).toMatchObject({ status: "recorded" });
    expect(await exec.send({ ...progress, replayed: true })).toMatchObject({ status: "duplicate" });
    expect(await exec.send({ ...completed, result: { tasks: [] } } as Receipt)).toMatchObject({ status: "rejected", code: "receipt_conflict" });
    // The history checker finds each receipt in the chain's message.
    expect(checkHistory(await readHistory(nc)).violations).toEqual([]);
  });

  it("decides only the first receipt of a chain it cannot apply whole: the others are answered pending, stored nowhere, and decided when sent alone", async () => {
    // A write's `accepted` must be answered before any side effect: it is never applied with what follows it.
    const { grant: g } = await claimedCall("tasks.write");
    const [accepted, progress, completed] = threeReceipts(g);
    const answers = await exec.postChain([accepted, progress, completed]);
    expect(answers.map((a) => a.status)).toEqual(["recorded", "pending", "pending"]);
    expect(await indexed(progress.receipt_id)).toBe(false);
    expect((await gw.api("GET", `/v1/assignments/${g.assignment_id}`)).state).toBe("running");
    expect(await exec.post(progress)).toMatchObject({ status: "recorded" });
    expect(await exec.post(completed)).toMatchObject({ status: "recorded" });
    expect((await gw.api("GET", `/v1/assignments/${g.assignment_id}`)).state).toBe("completed");

    // A read whose `accepted` names other arguments: refused (and indexed, as alone); what the read did behind it is not.
    const { grant: r, runId } = await claimedCall();
    const [badAccepted, readProgress, readDone] = threeReceipts(r, "0".repeat(64));
    const refused = await exec.postChain([badAccepted, readProgress, readDone]);
    expect(refused.map((a) => [a.status, a.code])).toEqual([
      ["rejected", "argument_digest_mismatch"],
      ["pending", undefined],
      ["pending", undefined],
    ]);
    expect(await indexed(badAccepted.receipt_id)).toBe(true);
    expect(await indexed(readDone.receipt_id)).toBe(false);
    expect(await exec.post(readDone)).toMatchObject({ status: "rejected", code: "illegal_transition" });
    // Its run cancelled (the claim revoked), the history holds no call left open.
    await gw.api("POST", `/v1/runs/${runId}:cancel`);
    expect(checkHistory(await readHistory(nc)).violations).toEqual([]);
  });

  it("answers a chain delivered again after it was applied whole as the first time: every receipt recorded, from the record, nothing written", async () => {
    const { grant: g } = await claimedCall();
    const chain = threeReceipts(g);
    expect((await exec.postChain(chain)).map((a) => a.status)).toEqual(["recorded", "recorded", "recorded"]);
    const stored = await storedAssignment(nc, g.assignment_id);
    const answers = await redeliver(chain, stored.accepted!.stream_seq);
    expect(answers.map((a) => [a.receipt_id, a.status])).toEqual(chain.map((r) => [r.receipt_id, "recorded"]));
    expect(await storedAssignment(nc, g.assignment_id)).toEqual(stored);
    for (const r of chain) expect(await indexed(r.receipt_id)).toBe(false);
  });

  it("answers the receipts after the first of a chain delivered again pending when the chain was not applied whole, even once they were applied alone", async () => {
    const { grant: g } = await claimedCall("tasks.write");
    const chain = threeReceipts(g);
    const [, progress, completed] = chain;
    expect((await exec.postChain(chain)).map((a) => a.status)).toEqual(["recorded", "pending", "pending"]);
    const chainSeq = (await storedAssignment(nc, g.assignment_id)).accepted!.stream_seq;
    // Not applied from the chain's message: still pending, nothing stored of them.
    expect((await redeliver(chain, chainSeq)).map((a) => a.status)).toEqual(["recorded", "pending", "pending"]);
    expect(await indexed(progress.receipt_id)).toBe(false);
    // Sent alone and applied from their own messages: the chain's message still took nothing of them.
    expect(await exec.post(progress)).toMatchObject({ status: "recorded" });
    expect(await exec.post(completed)).toMatchObject({ status: "recorded" });
    const stored = await storedAssignment(nc, g.assignment_id);
    expect((await redeliver(chain, chainSeq)).map((a) => a.status)).toEqual(["recorded", "pending", "pending"]);
    expect(await storedAssignment(nc, g.assignment_id)).toEqual(stored);
    expect(checkHistory(await readHistory(nc)).violations).toEqual([]);
  });

  it("reads the receipt index for a chain the stream did not take as its subject's first message, and applies none of it whole", async () => {
    const { grant: g } = await claimedCall();
    const chain = threeReceipts(g);
    const before = await lookups();
    // De-duplicated on the first receipt's id, but stored wherever the subject stands.
    const plain = headers();
    plain.set("Nats-Msg-Id", chain[0].receipt_id);
    const answers = await exec.postChain(chain, { headers: plain });
    // `accepted` has its own id for the message's: decided as a lone receipt is; the others would need the index.
    expect(answers.map((a) => a.status)).toEqual(["recorded", "pending", "pending"]);
    expect(await lookups()).toEqual({ read: before.read, skipped: before.skipped + 1 });
  });

  it("is not stored on a subject the executor published on before: nothing of it is answered or applied", async () => {
    const { grant: g } = await claimedCall();
    const [accepted, progress, completed] = threeReceipts(g);
    // A report ahead of `accepted`: refused, and stored on the executor's subject for this assignment.
    expect(await exec.post(progress)).toMatchObject({ status: "rejected", code: "illegal_transition" });
    const seqBefore = await lastSeq();
    const answers = await exec.postChain([accepted, { ...progress, seq: 2, receipt_id: receiptId(g, { kind: "progress", seq: 2 }) } as Receipt, completed], {
      timeoutMs: 500,
    });
    // No answer came: each was asked for on `tg.rq`, which knows none of them.
    expect(answers.map((a) => a.status)).toEqual(["pending", "pending", "pending"]);
    expect(await lastSeq()).toBe(seqBefore);
    expect((await gw.api("GET", `/v1/assignments/${g.assignment_id}`)).state).toBe("claimed");
  });
});
