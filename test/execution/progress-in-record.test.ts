import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NatsConnection } from "@nats-io/transport-node";
import { checkHistory, readHistory } from "../../src/checker/index.js";
import { AssignmentRecord } from "../../src/execution/model/records.js";
import type { ReceiptInput } from "../../src/execution/receipts/receipt-processor.js";
import { executionStores } from "../../src/kv/buckets.js";
import type { Grant, Receipt } from "../../src/wire/messages.js";
import { receiptId } from "../../src/wire/receipt-ids.js";
import { startExecutionFixture, type ExecutionFixture, type TestGateway } from "../helpers/execution-gateway.js";
import type { ProtocolExecutor } from "../helpers/protocol-executor.js";
import { processorOnSameBuckets } from "../helpers/receipt-processor.js";
import { receiptIndexed, storedAssignment, storedProgressEntry } from "../helpers/stored-records.js";

const SCOPE = "progress-record";

/**
 * Store layout 4 (the default): a progress report is recorded by a compare-and-set of its
 * assignment, which carries it in the record and answers for its receipt as it does for `accepted`
 * and `completed`: no progress entry, no index entry, and no read of the assignment when this
 * gateway wrote it last. A record carries at most 16 small reports; the rest go to the bucket.
 */
describe("progress carried by its assignment's record", () => {
  let fx: ExecutionFixture, gw: TestGateway, nc: NatsConnection, exec: ProtocolExecutor, sessionId: string;
  beforeAll(async () => {
    fx = await startExecutionFixture({
      scope: SCOPE,
      agent: "progress-bot",
      tools: [{ name: "tasks.read", binding_id: "b-progress", input_schema: { type: "object" } }],
      executor: { id: "exec-record", start: "heartbeat" },
    });
    ({ gw, nc, executor: exec, sessionId } = fx);
  });
  afterAll(async () => {
    await fx?.close();
  });

  /** A new tool call, claimed (not yet confirmed): its run and grant. */
  const claimedCall = async (): Promise<{ runId: string; grant: Grant }> => {
    const run = await gw.api("POST", `/v1/sessions/${sessionId}/runs`);
    const call = await gw.api("POST", `/v1/runs/${run.run_id}/tool-calls`, { tool_name: "tasks.read", arguments: {} });
    const id: string = call.assignment.assignment_id;
    const reply = await exec.claim(id, (await exec.pullFor(id)).generation);
    if (reply.status !== "granted") throw new Error(`claim refused: ${reply.code}`);
    return { runId: run.run_id, grant: reply.grant };
  };
  /** A new tool call, claimed and confirmed. */
  const runningCall = async (): Promise<{ runId: string; grant: Grant }> => {
    const call = await claimedCall();
    expect((await exec.post(exec.accepted(call.grant, receiptId(call.grant, { kind: "accepted" })))).status).toBe("recorded");
    return call;
  };
  const record = (assignmentId: string) => storedAssignment(nc, assignmentId);
  const bucketEntry = (assignmentId: string, seq: number) => storedProgressEntry(nc, assignmentId, seq);
  const indexEntryExists = (id: string) => receiptIndexed(nc, id);
  const report = (g: Grant, seq: number, progress: unknown) => exec.claimReceipt(g, { kind: "progress", seq, progress });
  const listed = async (assignmentId: string): Promise<Array<{ seq: number; progress: unknown }>> =>
    ((await gw.api("GET", `/v1/assignments/${assignmentId}`)).progress as Array<{ seq: number; progress: unknown }>).map(({ seq, progress }) => ({
      seq,
      progress,
    }));

  it("records a report in the record: no progress entry, no index entry; a resend, a conflict, another receipt for its seq and a query are answered from the record", async () => {
    const { grant: g } = await runningCall();
    const progress = report(g, 1, { step: "one" });
    expect((await exec.post(progress)).status).toBe("recorded");

    const carried = (await record(g.assignment_id)).progress_log;
    expect(carried).toMatchObject([{ seq: 1, receipt_id: progress.receipt_id, progress: { step: "one" }, indexed: { executor_id: exec.executorId } }]);
    expect(await bucketEntry(g.assignment_id, 1)).toBeNull();
    expect(await indexEntryExists(progress.receipt_id)).toBe(false);
    expect(await listed(g.assignment_id)).toEqual([{ seq: 1, progress: { step: "one" } }]);

    expect(await exec.send({ ...progress, replayed: true }, `${progress.receipt_id}-later`)).toMatchObject({ status: "duplicate" });
    expect(await exec.send({ ...progress, progress: { step: "other" } } as Receipt, `${progress.receipt_id}-other`)).toMatchObject({
      status: "rejected",
      code: "receipt_conflict",
    });
    const sameSeq = exec.receipt(g, { kind: "progress", seq: 1, progress: { step: "again" } });
    expect(await exec.send(sameSeq)).toMatchObject({ status: "rejected", code: "progress_conflict" });
    expect(await exec.query(progress)).toMatchObject({ status: "recorded" });
    // The record kept what it was written with.
    expect((await record(g.assignment_id)).progress_log).toEqual(carried);
    expect((await exec.post(exec.claimReceipt(g, { kind: "completed", result: {} }))).status).toBe("recorded");
  });

  it("refuses a report before `accepted` was confirmed and keeps one after the run ended for audit only", async () => {
    const early = await claimedCall();
    expect(await exec.send(report(early.grant, 1, {}))).toMatchObject({ status: "rejected", code: "illegal_transition" });
    const late = await runningCall();
    expect((await gw.http("POST", `/v1/runs/${late.runId}:cancel`)).status).toBe(200);
    expect(await exec.send(report(late.grant, 1, {}))).toMatchObject({ status: "late_ignored" });
    for (const g of [early.grant, late.grant]) expect((await record(g.assignment_id)).progress_log).toBeUndefined();
  });

  it("decides a report on the record this gateway wrote last, without reading it", async () => {
    const { grant: g } = await claimedCall();
    const store = await executionStores(nc);
    const assignments = (await store("assignments", AssignmentRecord)).withRevisionCache(16);
    let reads = 0;
    const get = assignments.get.bind(assignments);
    assignments.get = (key: string) => {
      reads++;
      return get(key);
    };
    const processor = await processorOnSameBuckets(nc, { assignments });
    const input = (receipt: Receipt, streamSeq: number): ReceiptInput => ({
      scope: SCOPE,
      subjectExecutorId: exec.executorId,
      subjectAssignmentId: g.assignment_id,
      receipt,
      streamSeq,
      msgId: undefined,
      redelivered: false,
    });
    expect(await processor.process(input(exec.accepted(g), 1_000_001))).toMatchObject({ status: "recorded" });
    reads = 0;
    expect(await processor.process(input(report(g, 1, { n: 1 }), 1_000_002))).toMatchObject({ status: "recorded" });
    expect(reads).toBe(0);
    expect((await record(g.assignment_id)).progress_log).toMatchObject([{ seq: 1, progress: { n: 1 } }]);
  });

  it("sends the reports past the record's room to the bucket, every later one too, and lists them all by seq", async () => {
    const { grant: g } = await runningCall();
    for (let seq = 1; seq <= 17; seq++) expect((await exec.post(report(g, seq, { seq }))).status).toBe("recorded");
    const full = await record(g.assignment_id);
    expect(full.progress_log).toHaveLength(16);
    expect(full.progress_in_bucket).toBe(true);
    expect(await bucketEntry(g.assignment_id, 17)).toMatchObject({ seq: 17, progress: { seq: 17 } });
    // A seq the record holds is still a conflict for another receipt, though reports now go to the bucket.
    expect(await exec.send(exec.receipt(g, { kind: "progress", seq: 3, progress: {} }))).toMatchObject({ status: "rejected", code: "progress_conflict" });
    expect(await bucketEntry(g.assignment_id, 3)).toBeNull();
    expect((await listed(g.assignment_id)).map((p) => p.seq)).toEqual(Array.from({ length: 17 }, (_, i) => i + 1));

    // A large report goes to the bucket at once, and so does every later one, however small.
    const { grant: big } = await runningCall();
    expect((await exec.post(report(big, 1, { text: "x".repeat(2_000) }))).status).toBe("recorded");
    expect((await exec.post(report(big, 2, { small: true }))).status).toBe("recorded");
    const marked = await record(big.assignment_id);
    expect(marked.progress_log).toBeUndefined();
    expect(marked.progress_in_bucket).toBe(true);
    expect(await bucketEntry(big.assignment_id, 2)).toMatchObject({ progress: { small: true } });
    expect((await listed(big.assignment_id)).map((p) => p.seq)).toEqual([1, 2]);

    for (const done of [g, big]) expect((await exec.post(exec.claimReceipt(done, { kind: "completed", result: {} }))).status).toBe("recorded");
    // (Another case here processes receipts at made-up stream sequences: only these two calls are held to the checker.)
    const checked = checkHistory(await readHistory(nc));
    expect(checked.violations.filter((v) => v.assignment_id === g.assignment_id || v.assignment_id === big.assignment_id)).toEqual([]);
    expect(checked.counts.progress_in_records).toBeGreaterThanOrEqual(16);
    expect(checked.counts.progress).toBeGreaterThanOrEqual(19);
  });
});
