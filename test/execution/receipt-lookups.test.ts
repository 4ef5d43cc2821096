import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NatsConnection } from "@nats-io/transport-node";
import { Kvm } from "@nats-io/kv";
import { executionStores } from "../../src/kv/buckets.js";
import { AssignmentRecord } from "../../src/execution/model/records.js";
import { DEDUP_MARGIN_MS, type ReceiptInput } from "../../src/execution/receipts/receipt-processor.js";
import type { Grant, Receipt } from "../../src/wire/messages.js";
import { receiptId } from "../../src/wire/receipt-ids.js";
import { startExecutionFixture, type ExecutionFixture, type TestGateway } from "../helpers/execution-gateway.js";
import type { ProtocolExecutor } from "../helpers/protocol-executor.js";
import { receiptIndexLookups } from "../helpers/receipt-lookups.js";
import { processorOnSameBuckets } from "../helpers/receipt-processor.js";

const SCOPE = "prod";

/**
 * A receipt under the id bound to its claim (as the ToolRunner names them), de-duplicated by the
 * stream on that id and delivered for the first time, inside the window after its claim, is decided
 * without reading the receipt index. Whatever it skips, every answer stays as the index would give it.
 */
describe("receipt index lookups", () => {
  let fx: ExecutionFixture, gw: TestGateway, nc: NatsConnection, exec: ProtocolExecutor, sessionId: string;
  beforeAll(async () => {
    fx = await startExecutionFixture({
      scope: SCOPE,
      agent: "support-bot",
      tools: [{ name: "tasks.read", binding_id: "b-read", input_schema: { type: "object" } }],
      executor: { id: "exec-1", start: "heartbeat" },
    });
    ({ gw, nc, executor: exec, sessionId } = fx);
  });
  afterAll(() => fx?.close());

  /** A new tool call, claimed: its grant. */
  const claimedCall = async (): Promise<Grant> => {
    const run = await gw.api("POST", `/v1/sessions/${sessionId}/runs`);
    const call = await gw.api("POST", `/v1/runs/${run.run_id}/tool-calls`, { tool_name: "tasks.read", arguments: { cursor: "a" } });
    const id: string = call.assignment.assignment_id;
    const reply = await exec.claim(id, (await exec.pullFor(id)).generation);
    if (reply.status !== "granted") throw new Error(`claim refused: ${reply.code}`);
    return reply.grant;
  };
  /** The grant's `accepted` under its claim-bound id. */
  const claimAccepted = (g: Grant): Receipt => exec.accepted(g, receiptId(g, { kind: "accepted" }));
  const lookups = () => receiptIndexLookups(gw.baseUrl);

  it("decides a call's receipts under claim-bound ids without a lookup, and answers their resends and conflicts as before", async () => {
    const g = await claimedCall();
    const receipts = [
      claimAccepted(g),
      exec.claimReceipt(g, { kind: "progress", seq: 1, progress: { half: true } }),
      exec.claimReceipt(g, { kind: "completed", result: { v: 1 } }),
    ];
    const before = await lookups();
    for (const r of receipts) expect((await exec.post(r)).status).toBe("recorded");
    expect(await lookups()).toEqual({ read: before.read, skipped: before.skipped + 3 });

    // Inside the stream's window the same id is dropped as a duplicate, and the stored answer asked for.
    for (const r of receipts) expect(await exec.send({ ...r, replayed: true })).toMatchObject({ status: "recorded" });
    // Past it (another Nats-Msg-Id: not de-duplicated on its id), the index or the assignment answers.
    const [accepted, progress, done] = receipts as [Receipt, Receipt, Receipt];
    for (const r of receipts) expect(await exec.send({ ...r, replayed: true }, `${r.receipt_id}-later`)).toMatchObject({ status: "duplicate" });
    expect(await exec.send({ ...progress, progress: { half: false } } as Receipt, `${progress.receipt_id}-other`)).toMatchObject({
      status: "rejected",
      code: "receipt_conflict",
    });
    expect(await exec.send({ ...done, result: { v: 2 } } as Receipt, `${done.receipt_id}-other`)).toMatchObject({
      status: "rejected",
      code: "receipt_conflict",
    });
    expect(await exec.send({ ...accepted, operation_key: "other" } as Receipt, `${accepted.receipt_id}-other`)).toMatchObject({
      status: "rejected",
      code: "receipt_conflict",
    });
    const after = await lookups();
    expect(after.skipped).toBe(before.skipped + 3);
    expect(after.read).toBe(before.read + 6);
  });

  it("keeps the stored answer of a receipt refused without a lookup: progress before `accepted`, sent again once it is running", async () => {
    const g = await claimedCall();
    const early = exec.claimReceipt(g, { kind: "progress", seq: 1, progress: { early: true } });
    const before = await lookups();
    expect(await exec.post(early)).toMatchObject({ status: "rejected", code: "illegal_transition" });
    expect((await exec.post(claimAccepted(g))).status).toBe("recorded");
    expect((await lookups()).skipped).toBe(before.skipped + 2);
    // Running now, where a new progress would be recorded: the same receipt keeps the answer it got.
    expect(await exec.send({ ...early, replayed: true })).toMatchObject({ status: "rejected", code: "illegal_transition" });
    expect(await exec.send({ ...early, replayed: true }, `${early.receipt_id}-later`)).toMatchObject({ status: "rejected", code: "illegal_transition" });
    // Nor was it stored as progress.
    expect(await (await new Kvm(nc).open("tg_progress")).get(`${g.assignment_id}.1`)).toBeNull();
  });

  it("looks up a receipt whose id is not bound to its claim, or that the stream did not de-duplicate on its id", async () => {
    const g = await claimedCall();
    const before = await lookups();
    // A free-form id (an executor of its own making).
    expect((await exec.post(exec.accepted(g))).status).toBe("recorded");
    // The id of another seq under this claim.
    const progress = exec.claimReceipt(g, { kind: "progress", seq: 2, progress: {} });
    expect((await exec.send({ ...progress, seq: 3 } as Receipt)).status).toBe("recorded");
    // The id bound to another claim this executor holds (its token, its assignment).
    const other = await claimedCall();
    const borrowed = exec.claimReceipt(other, { kind: "progress", seq: 4, progress: {} }).receipt_id;
    expect((await exec.post(exec.receipt(g, { kind: "progress", seq: 4, progress: {} }, borrowed))).status).toBe("recorded");
    // A claim-bound id, but another Nats-Msg-Id.
    const done = exec.claimReceipt(g, { kind: "completed", result: {} });
    expect((await exec.send(done, `${done.receipt_id}-x`)).status).toBe("recorded");
    expect(await lookups()).toEqual({ read: before.read + 4, skipped: before.skipped });
  });

  it("looks up a receipt delivered again, and one processed later than the window after its claim", async () => {
    const g = await claimedCall();
    const accepted = claimAccepted(g);
    expect((await exec.post(accepted)).status).toBe("recorded");
    // Another gateway that remembers the assignment (it names the claim) and counts its lookups.
    const store = await executionStores(nc);
    const remembering = (await store("assignments", AssignmentRecord)).withRevisionCache(16);
    const stored = (await remembering.get(g.assignment_id))!;
    const claimedAt = stored.value.claim!.claimed_at;
    const seen: string[] = [];
    let now = claimedAt + 1_000;
    const processor = await processorOnSameBuckets(nc, { assignments: remembering, metrics: { receiptIndexLookup: (o) => seen.push(o) }, now: () => now });
    const progress = exec.claimReceipt(g, { kind: "progress", seq: 1, progress: { n: 1 } });
    const input = (redelivered: boolean): ReceiptInput => ({
      scope: SCOPE,
      subjectExecutorId: exec.executorId,
      subjectAssignmentId: g.assignment_id,
      receipt: progress,
      streamSeq: 1_000_001,
      msgId: progress.receipt_id,
      redelivered,
    });
    expect(await processor.process(input(false))).toMatchObject({ status: "recorded" });
    expect(await processor.process(input(true))).toMatchObject({ status: "recorded" });
    now = claimedAt + 120_000 - DEDUP_MARGIN_MS + 1;
    expect(await processor.process(input(false))).toMatchObject({ status: "recorded" });
    expect(seen).toEqual(["skipped", "read", "read"]);
  });
});
