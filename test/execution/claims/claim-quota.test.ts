import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { EXECUTION_BUCKETS } from "../../../src/streams/names.js";
import { ClaimHoldings } from "../../../src/execution/model/records.js";
import { decode, encode } from "../../../src/wire/codec.js";
import type { ClaimReply, Grant } from "../../../src/wire/messages.js";
import { startTestNats, type TestNats } from "../../helpers/nats.js";
import { seedSession, startExecutionFixture, startExecutionGateway, type ExecutionFixture, type TestGateway } from "../../helpers/execution-gateway.js";
import { ProtocolExecutor } from "../../helpers/protocol-executor.js";
import { until } from "../../helpers/until.js";

const SCOPE = "quota";
const MAX = 3;
const LEASE_MS = 3_000;

/** The in-flight bound per executor, with two gateway replicas answering claims (queue group) on one server. */
describe("in-flight claims per executor", () => {
  let nats: TestNats;
  let gateways: TestGateway[];
  let nc: NatsConnection;
  let exec: ProtocolExecutor;
  let other: ProtocolExecutor;
  let sessionId: string;
  const granted: Grant[] = [];
  const refusedIds: string[] = [];

  const gw = () => gateways[0]!;
  const newRun = async (): Promise<string> => (await gw().http("POST", `/v1/sessions/${sessionId}/runs`)).body.run_id;
  const newCalls = async (runId: string, n: number): Promise<string[]> => {
    const ids: string[] = [];
    for (let i = 0; i < n; i++)
      ids.push((await gw().http("POST", `/v1/runs/${runId}/tool-calls`, { tool_name: "work.do", arguments: { i } })).body.assignment.assignment_id);
    return ids;
  };
  const state = async (id: string) => (await gw().http("GET", `/v1/assignments/${id}`)).body as { state: string; generation: number };
  /**
   * A claim of the call at its current generation: a claim refused `too_many_claims` on a replica
   * that thought the executor had room gives the call back at once, at the next generation.
   */
  const claimNow = async (e: ProtocolExecutor, id: string) => e.claim(id, (await state(id)).generation);
  const grantOf = (reply: ClaimReply): Grant => {
    if (reply.status !== "granted") throw new Error(`claim refused: ${reply.code} ${reply.reason}`);
    return reply.grant;
  };

  beforeAll(async () => {
    nats = await startTestNats();
    const options = { maxClaimsPerExecutor: MAX, leaseMs: LEASE_MS, sweepIntervalMs: 50, reofferAfterMs: 60_000 };
    gateways = [await startExecutionGateway(nats.url, options), await startExecutionGateway(nats.url, options)];
    sessionId = await seedSession(gw().gateway.store, {
      scope: SCOPE,
      agent: "quota-bot",
      tools: [{ name: "work.do", binding_id: "b-quota", tool_kind: "write" }],
    });
    nc = await connect({ servers: nats.url });
    exec = new ProtocolExecutor(nc, SCOPE, "exec-1", ["b-quota"]);
    other = new ProtocolExecutor(nc, SCOPE, "exec-2", ["b-quota"]);
    for (const e of [exec, other]) expect((await e.heartbeat()).status).toBe("ok");
  });
  afterAll(async () => {
    exec?.close();
    other?.close();
    await nc?.close();
    for (const g of gateways ?? []) await g.close();
    await nats?.stop();
  });

  it(`grants ${MAX} of 8 concurrent claims, whichever replica answers, and refuses the rest with too_many_claims`, async () => {
    const ids = await newCalls(await newRun(), 8);
    const replies = await Promise.all(ids.map((id) => exec.claim(id, 0)));
    replies.forEach((r, i) => (r.status === "granted" ? granted.push(r.grant) : refusedIds.push(ids[i]!)));
    expect(granted).toHaveLength(MAX);
    for (const r of replies.filter((r) => r.status === "refused")) expect(r).toMatchObject({ code: "too_many_claims" });
    // The bound is per executor: another executor of the scope is not held back.
    expect(grantOf(await claimNow(other, refusedIds.pop()!)).executor_id).toBe("exec-2");
  });

  it("counts a claim again once its work ended: completed, lease expired, run ended", async () => {
    const [done, accepted, unconfirmed] = granted;
    // completed: the slot comes back.
    expect((await exec.send(exec.accepted(done!))).status).toBe("recorded");
    expect((await exec.send(exec.receipt(done!, { kind: "completed", result: { ok: true } }))).status).toBe("recorded");
    grantOf(await claimNow(exec, refusedIds.pop()!));
    expect(await claimNow(exec, refusedIds[0]!)).toMatchObject({ status: "refused", code: "too_many_claims" });

    // A confirmed claim keeps its slot; an unconfirmed one gives it back when its lease expires.
    expect((await exec.send(exec.accepted(accepted!))).status).toBe("recorded");
    await until("lease expiry", async () => ((await state(unconfirmed!.assignment_id)).state === "pending" ? true : undefined), LEASE_MS + 5_000);
    grantOf(await claimNow(exec, refusedIds.pop()!));

    // Ending the run revokes and abandons everything this executor held there.
    expect((await gw().http("POST", `/v1/runs/${done!.run_id}:cancel`)).status).toBe(200);
    const fresh = await newCalls(await newRun(), MAX);
    for (const id of fresh) grantOf(await exec.claim(id, 0));
  });
});

/** One gateway: the claims of one executor that arrive together share the compare-and-set of its record. */
describe("claim slots written together", () => {
  let fx: ExecutionFixture;

  beforeAll(async () => {
    fx = await startExecutionFixture({
      scope: "batch",
      agent: "batch-bot",
      tools: [{ name: "work.do", binding_id: "b-batch", tool_kind: "read" }],
      executor: { id: "exec-b", start: "heartbeat" },
      execution: { maxClaimsPerExecutor: 64 },
    });
  });
  afterAll(async () => {
    await fx?.close();
  });
  const newRun = async (): Promise<string> => (await fx.gw.api("POST", `/v1/sessions/${fx.sessionId}/runs`)).run_id;
  const call = async (runId: string, i: number) =>
    (await fx.gw.api("POST", `/v1/runs/${runId}/tool-calls`, { tool_name: "work.do", arguments: { i } })).assignment.assignment_id as string;

  it("grants 20 concurrent claims with far fewer than 20 writes of the executor's record", async () => {
    const runId = await newRun();
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) ids.push(await call(runId, i));
    const jsm = await jetstreamManager(fx.nc);
    const writes = async () => (await jsm.streams.info(`KV_${EXECUTION_BUCKETS.claims}`)).state.last_seq;
    const before = await writes();
    const replies = await Promise.all(ids.map((id) => fx.executor.claim(id, 0)));
    expect(replies.map((r) => r.status)).toEqual(ids.map(() => "granted"));
    expect(await writes()).toBeLessThan(before + 10);
  });

  it("drops the entries of claims it saw end whenever it writes the record, not only once the record is full", async () => {
    const runId = await newRun();
    const lone = new ProtocolExecutor(fx.nc, "batch", "exec-lone", ["b-batch"]);
    try {
      expect((await lone.heartbeat()).status).toBe("ok");
      const grants = [];
      for (let i = 0; i < 3; i++) {
        const reply = await lone.claim(await call(runId, i), 0);
        if (reply.status !== "granted") throw new Error(`claim refused: ${reply.code}`);
        grants.push(reply.grant);
      }
      for (const grant of grants.slice(0, 2)) {
        expect((await lone.send(lone.accepted(grant))).status).toBe("recorded");
        expect((await lone.send(lone.receipt(grant, { kind: "completed", result: { ok: true } }))).status).toBe("recorded");
      }
      const last = await call(runId, 3);
      expect((await lone.claim(last, 0)).status).toBe("granted");
      const kv = await new Kvm(fx.nc).open(EXECUTION_BUCKETS.claims);
      const held = decode(ClaimHoldings, (await kv.get("batch.exec-lone"))!.value).held.map((e) => e.assignment_id);
      expect(held.sort()).toEqual([grants[2]!.assignment_id, last].sort());
    } finally {
      lone.close();
    }
  });
});

/**
 * A gateway that remembers an executor's record with room writes the slot and the claim together; when
 * the record turns out full (another replica reserved the last slot meanwhile), the claim it just won
 * goes straight back to the candidates, at the next generation, and no grant is sent.
 */
describe("a claim whose slot is refused after it was won", () => {
  let fx: ExecutionFixture;
  let other: ProtocolExecutor;

  beforeAll(async () => {
    fx = await startExecutionFixture({
      scope: "back",
      agent: "back-bot",
      tools: [{ name: "work.do", binding_id: "b-back" }],
      executor: { id: "exec-full", start: "heartbeat" },
      execution: { maxClaimsPerExecutor: 2 },
    });
    other = new ProtocolExecutor(fx.nc, "back", "exec-free", ["b-back"]);
    expect((await other.heartbeat()).status).toBe("ok");
  });
  afterAll(async () => {
    other?.close();
    await fx?.close();
  });

  it("is given back at the next generation and offered again at once; the executor is refused too_many_claims", async () => {
    const runId = (await fx.gw.api("POST", `/v1/sessions/${fx.sessionId}/runs`)).run_id;
    const call = async (i: number) =>
      (await fx.gw.api("POST", `/v1/runs/${runId}/tool-calls`, { tool_name: "work.do", arguments: { i } })).assignment.assignment_id as string;
    const [held, reservedElsewhere, contested] = [await call(1), await call(2), await call(3)];
    expect((await fx.executor.claim(held, 0)).status).toBe("granted");

    // Another replica reserves the executor's last slot, for a claim it is about to make: this
    // gateway still remembers the record with one entry.
    const kv = await new Kvm(fx.nc).open(EXECUTION_BUCKETS.claims);
    const record = decode(ClaimHoldings, (await kv.get("back.exec-full"))!.value);
    record.held.push({ assignment_id: reservedElsewhere, generation: 0, reserved_at: Date.now() });
    await kv.put("back.exec-full", encode(record));

    expect(await fx.executor.claim(contested, 0)).toMatchObject({ status: "refused", code: "too_many_claims" });
    const a = await fx.gw.api("GET", `/v1/assignments/${contested}`);
    expect(a).toMatchObject({ state: "pending", generation: 1 });
    // Offered again without waiting for a sweeper: another executor takes it.
    const candidate = await other.pullFor(contested, 1);
    expect(await other.claim(contested, candidate.generation)).toMatchObject({ status: "granted", grant: { executor_id: "exec-free", generation: 1 } });
  });
});
