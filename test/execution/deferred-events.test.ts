import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NatsConnection } from "@nats-io/transport-node";
import { RunEventMessage, type RunEvent } from "../../src/execution/events/run-events.js";
import { DEFERRED_EVENTS_MS } from "../../src/execution/events/assignment-events.js";
import { STORED_MAX_JSON_DEPTH } from "../../src/validation/json-depth.js";
import { decode } from "../../src/wire/codec.js";
import { itemsOf } from "../../src/wire/primitives.js";
import type { Grant } from "../../src/wire/messages.js";
import { receiptId } from "../../src/wire/receipt-ids.js";
import { startExecutionFixture, startExecutionGateway, type ExecutionFixture, type TestGateway } from "../helpers/execution-gateway.js";
import type { ProtocolExecutor } from "../helpers/protocol-executor.js";
import { storedAssignment } from "../helpers/stored-records.js";
import { until } from "../helpers/until.js";

const SCOPE = "deferred";

/**
 * Store layout 7: a tool call's creation and a claim leave their run events in the assignment record
 * for its next write, which publishes them before its own in one event message; the gateway that
 * left them publishes them itself when no write comes soon, or when it stops.
 */
describe("run events left in the record for the next write", () => {
  let fx: ExecutionFixture, nc: NatsConnection, exec: ProtocolExecutor, sessionId: string;
  let gw: TestGateway;
  /** Per run, its event messages in the order stored, each the events it holds (`from>to` for a state change). */
  const messages = new Map<string, string[][]>();
  /** Per assignment, how many times its record was written. */
  const writes = new Map<string, number>();
  beforeAll(async () => {
    fx = await startExecutionFixture({
      scope: SCOPE,
      agent: "deferred-bot",
      tools: [{ name: "tasks.read", binding_id: "b-deferred", input_schema: { type: "object" } }],
      executor: { id: "exec-deferred", start: "heartbeat" },
    });
    ({ nc, executor: exec, sessionId, gw } = fx);
    nc.subscribe("tg.evt.>", {
      callback: (_err, m) => {
        const held = itemsOf(decode(RunEventMessage, m.data, STORED_MAX_JSON_DEPTH));
        messages.set(held[0]!.run_id, [...(messages.get(held[0]!.run_id) ?? []), held.map(told)]);
      },
    });
    nc.subscribe("$KV.tg_assignments.>", {
      callback: (_err, m) => {
        const key = m.subject.split(".")[2]!;
        writes.set(key, (writes.get(key) ?? 0) + 1);
      },
    });
    await nc.flush();
  });
  afterAll(async () => {
    await gw?.close();
    await fx?.close();
  });

  const told = (e: RunEvent) => (e.type === "assignment" ? `${e.from ?? "new"}>${e.to}` : e.type);
  /** A new call: its run and assignment. */
  const newCall = async () => {
    const run = await gw.api("POST", `/v1/sessions/${sessionId}/runs`);
    const call = await gw.api("POST", `/v1/runs/${run.run_id}/tool-calls`, { tool_name: "tasks.read", arguments: {} });
    return { runId: run.run_id as string, id: call.assignment.assignment_id as string };
  };
  const claim = async (id: string): Promise<Grant> => {
    const reply = await exec.claim(id, (await exec.pullFor(id)).generation);
    if (reply.status !== "granted") throw new Error(`claim refused: ${reply.code}`);
    return reply.grant;
  };
  /** The events of `runId` stored after its creation (the run's own `active` event comes first). */
  const callMessages = async (runId: string, count: number) => {
    await until(`${count} event messages of the call`, async () => ((messages.get(runId) ?? []).length > count ? true : undefined));
    await nc.flush();
    return messages.get(runId)!.slice(1);
  };

  it("tells a call answered at once, creation to settlement, in one event message, with no write more", async () => {
    const { runId, id } = await newCall();
    const g = await claim(id);
    const answers = await exec.postChain([
      exec.receipt(g, { kind: "accepted", operation_key: g.operation_key, argument_digest: g.argument_digest }, receiptId(g, { kind: "accepted" })),
      exec.claimReceipt(g, { kind: "progress", seq: 1, progress: { page: 1 } }),
      exec.claimReceipt(g, { kind: "completed", result: { tasks: [] } }),
    ]);
    expect(answers.map((a) => a.status)).toEqual(["recorded", "recorded", "recorded"]);
    expect(await callMessages(runId, 1)).toEqual([["new>pending", "pending>claimed", "claimed>running", "progress", "running>completed"]]);
    expect((await storedAssignment(nc, id)).deferred_events).toBeUndefined();
    // The creation, the claim, the receipts: no write of its own for the events.
    await new Promise((r) => setTimeout(r, DEFERRED_EVENTS_MS + 100));
    expect(writes.get(id)).toBe(3);
    expect(messages.get(runId)).toHaveLength(2);
  });

  it("tells a creation nobody claims, and a claim nothing follows, a moment later, each with a write of its own", async () => {
    const { runId, id } = await newCall();
    expect((await storedAssignment(nc, id)).deferred_events).toHaveLength(1);
    expect(await callMessages(runId, 1)).toEqual([["new>pending"]]);
    expect((await storedAssignment(nc, id)).deferred_events).toBeUndefined();
    await claim(id);
    expect(await callMessages(runId, 2)).toEqual([["new>pending"], ["pending>claimed"]]);
    expect(writes.get(id)).toBe(4);
  });

  it("has the lease sweeper publish what a gateway that died left in a record, once the call's watch is due", async () => {
    // A gateway whose own publishing never comes stands for one that died after writing them. The
    // creation's watch is due 2.5 s on: a claim right after the creation relies on it.
    await gw.close();
    gw = await startExecutionGateway(fx.nats.url, { deferredEventsMs: 600_000, dispatchGraceMs: 2_500, sweepIntervalMs: 100 });
    // Claimed before its creation's watch came due: the sweeper finds the claim within its lease.
    const claimedSoon = await newCall();
    await claim(claimedSoon.id);
    // Nobody claims it: its creation's watch comes due with its candidate still waiting.
    const unclaimed = await newCall();
    expect((await storedAssignment(nc, claimedSoon.id)).deferred_events).toHaveLength(2);
    expect(await callMessages(claimedSoon.runId, 1)).toEqual([["new>pending", "pending>claimed"]]);
    expect(await callMessages(unclaimed.runId, 1)).toEqual([["new>pending"]]);
    expect((await storedAssignment(nc, unclaimed.id)).deferred_events).toBeUndefined();
    expect(await storedAssignment(nc, claimedSoon.id)).toMatchObject({ state: "claimed", generation: 0 });
    // One write each for them: nothing else of the calls changed.
    expect(writes.get(claimedSoon.id)).toBe(3);
    expect(writes.get(unclaimed.id)).toBe(2);
    await gw.close();
    gw = await startExecutionGateway(fx.nats.url);
  });

  it("publishes what it left in records when it stops; under layout 6 every write publishes at once", async () => {
    const first = await newCall();
    const second = await newCall();
    await gw.close();
    expect((await storedAssignment(nc, first.id)).deferred_events).toBeUndefined();
    expect(await callMessages(first.runId, 1)).toEqual([["new>pending"]]);
    expect(await callMessages(second.runId, 1)).toEqual([["new>pending"]]);
    gw = await startExecutionGateway(fx.nats.url, { storeLayout: 6 });
    const third = await newCall();
    // Layout 6 publishes at once.
    expect(await callMessages(third.runId, 1)).toEqual([["new>pending"]]);
    expect((await storedAssignment(nc, third.id)).deferred_events).toBeUndefined();
    await gw.close();
    gw = await startExecutionGateway(fx.nats.url);
  });
});
