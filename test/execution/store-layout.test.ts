import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NatsConnection } from "@nats-io/transport-node";
import { Kvm } from "@nats-io/kv";
import { jetstreamManager } from "@nats-io/jetstream";
import { executionStores } from "../../src/kv/buckets.js";
import { ProjectionStore } from "../../src/execution/receipts/projection-store.js";
import { ReceiptLog } from "../../src/execution/receipts/receipt-log.js";
import { checkHistory, readHistory } from "../../src/checker/index.js";
import { AssignmentRecord, ProjectionRecord } from "../../src/execution/model/records.js";
import { decode, encode } from "../../src/wire/codec.js";
import { startExecutionFixture, startExecutionGateway, type ExecutionFixture, type TestGateway } from "../helpers/execution-gateway.js";
import type { ProtocolExecutor } from "../helpers/protocol-executor.js";

const SCOPE = "layout";

/**
 * Store layouts in one cluster: layout 1 keeps a completed call's projection in the projections
 * bucket, layout 2 in the assignment record its completion wrote. A gateway of either serves both,
 * so a cluster moves from 1 to 2 while gateways are replaced one by one.
 */
describe("store layouts: where a completed call's projection is stored", () => {
  let fx: ExecutionFixture, nc: NatsConnection, exec: ProtocolExecutor, sessionId: string;
  let gw: TestGateway;
  beforeAll(async () => {
    fx = await startExecutionFixture({
      scope: SCOPE,
      agent: "layout-bot",
      tools: [{ name: "tasks.read", binding_id: "b-layout", input_schema: { type: "object" } }],
      executor: { id: "exec-layout", start: "heartbeat" },
      execution: { storeLayout: 1 },
    });
    ({ gw, nc, executor: exec, sessionId } = fx);
  });
  afterAll(async () => {
    if (gw !== fx?.gw) await gw?.close();
    await fx?.close();
  });

  /** A tool call through `via`, completed with `result`; returns its run and assignment. */
  const completedCall = async (via: TestGateway, result: unknown, args: unknown = {}): Promise<{ runId: string; id: string }> => {
    const runId = (await via.api("POST", `/v1/sessions/${sessionId}/runs`)).run_id as string;
    const id = (await via.api("POST", `/v1/runs/${runId}/tool-calls`, { tool_name: "tasks.read", arguments: args })).assignment.assignment_id as string;
    const candidate = await exec.pullFor(id);
    const reply = await exec.claim(id, candidate.generation);
    if (reply.status !== "granted") throw new Error(`claim refused: ${reply.code}`);
    expect((await exec.send(exec.accepted(reply.grant))).status).toBe("recorded");
    expect((await exec.send(exec.receipt(reply.grant, { kind: "completed", result }))).status).toBe("recorded");
    return { runId, id };
  };
  const storedRecord = async (id: string) => decode(AssignmentRecord, (await (await new Kvm(nc).open("tg_assignments")).get(id))!.value);
  const bucketEntry = async (id: string) => {
    const entry = await (await new Kvm(nc).open("tg_projections")).get(id);
    return entry?.operation === "PUT" ? decode(ProjectionRecord, entry.value) : null;
  };
  const servedPreview = async (via: TestGateway, runId: string) => (await via.api("GET", `/v1/runs/${runId}/history`)).tool_calls[0].context_preview;

  it("layout 1 stores it in the projections bucket; layout 2 in the completing record; gateways of either layout serve both", async () => {
    const first = await completedCall(gw, { page: 1 });
    expect((await storedRecord(first.id)).projection).toBeUndefined();
    expect(await bucketEntry(first.id)).toMatchObject({ assignment_id: first.id, context_preview: { result: { page: 1 } } });

    // A gateway of layout 2 replaces the layout-1 one (the receipts consumer is shared: only one runs at a time here).
    const second = await startExecutionGateway(fx.nats.url, { storeLayout: 2 });
    await fx.gw.close();
    gw = second;
    const next = await completedCall(gw, { page: 2 });
    const record = await storedRecord(next.id);
    expect(record.state).toBe("completed");
    expect(record.projection).toMatchObject({ receipt_id: record.final!.receipt_id, context_preview: { truncated: false, result: { page: 2 } } });
    expect(await bucketEntry(next.id)).toBeNull();
    expect(await servedPreview(gw, first.runId)).toMatchObject({ result: { page: 1 } });
    expect(await servedPreview(gw, next.runId)).toEqual(record.projection!.context_preview);

    // Back to layout 1 (a rollback of the setting): the carried projection is served as stored, never formed again.
    const third = await startExecutionGateway(fx.nats.url, { storeLayout: 1 });
    await gw.close();
    gw = third;
    expect(await servedPreview(gw, next.runId)).toEqual(record.projection!.context_preview);
    expect(await bucketEntry(next.id)).toBeNull();

    // The history checker reads both places.
    const report = checkHistory(await readHistory(nc));
    expect(report.violations).toEqual([]);
    expect(report.counts.projections).toBe(2);
  });

  it("layout 2 leaves to the bucket a projection its record has no room for (one message holds a record)", async () => {
    const { id } = await completedCall(gw, { page: 3 });
    const { projection: _stored, ...record } = await storedRecord(id);
    const store = await executionStores(nc);
    const receipts = new ReceiptLog(await jetstreamManager(nc));
    const withLimit = async (limit: number) => new ProjectionStore(await store("projections", ProjectionRecord), receipts, 2, () => limit);
    const receiptId = record.final!.receipt_id;
    const carrying = (await withLimit(Number.MAX_SAFE_INTEGER)).carrying(record, receiptId, { page: 3 });
    expect(carrying.write.projection).toMatchObject({ receipt_id: receiptId, context_preview: { result: { page: 3 } } });
    // What the decision measures is what is written: the completed record with its projection, and room for the message's headers.
    expect(carrying.encoded).toEqual(encode(carrying.write));
    const needed = carrying.encoded!.byteLength + 4_096;
    expect((await withLimit(needed)).carrying(record, receiptId, { page: 3 }).write).toHaveProperty("projection");
    expect((await withLimit(needed - 64)).carrying(record, receiptId, { page: 3 })).toEqual({ write: record });
  });
});
