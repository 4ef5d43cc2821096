import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { EXECUTION_BUCKETS } from "../../../src/streams/names.js";
import type { ClaimReply, Grant } from "../../../src/wire/messages.js";
import { startTestNats, type TestNats } from "../../helpers/nats.js";
import { seedSession, startExecutionGateway, type TestGateway } from "../../helpers/execution-gateway.js";
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
    expect(grantOf(await other.claim(refusedIds.pop()!, 0)).executor_id).toBe("exec-2");
  });

  it("counts a claim again once its work ended: completed, lease expired, run ended", async () => {
    const [done, accepted, unconfirmed] = granted;
    // completed: the slot comes back.
    expect((await exec.send(exec.accepted(done!))).status).toBe("recorded");
    expect((await exec.send(exec.receipt(done!, { kind: "completed", result: { ok: true } }))).status).toBe("recorded");
    grantOf(await exec.claim(refusedIds.pop()!, 0));
    expect(await exec.claim(refusedIds[0]!, 0)).toMatchObject({ status: "refused", code: "too_many_claims" });

    // A confirmed claim keeps its slot; an unconfirmed one gives it back when its lease expires.
    expect((await exec.send(exec.accepted(accepted!))).status).toBe("recorded");
    await until("lease expiry", async () => ((await state(unconfirmed!.assignment_id)).state === "pending" ? true : undefined), LEASE_MS + 5_000);
    grantOf(await exec.claim(refusedIds.pop()!, 0));

    // Ending the run revokes and abandons everything this executor held there.
    expect((await gw().http("POST", `/v1/runs/${done!.run_id}:cancel`)).status).toBe(200);
    const fresh = await newCalls(await newRun(), MAX);
    for (const id of fresh) grantOf(await exec.claim(id, 0));
  });
});

/** One gateway: the claims of one executor that arrive together share the compare-and-set of its record. */
describe("claim slots written together", () => {
  let nats: TestNats;
  let gateway: TestGateway;
  let nc: NatsConnection;
  let exec: ProtocolExecutor;
  let sessionId: string;

  beforeAll(async () => {
    nats = await startTestNats();
    gateway = await startExecutionGateway(nats.url, { maxClaimsPerExecutor: 64 });
    sessionId = await seedSession(gateway.gateway.store, {
      scope: "batch",
      agent: "batch-bot",
      tools: [{ name: "work.do", binding_id: "b-batch", tool_kind: "read" }],
    });
    nc = await connect({ servers: nats.url });
    exec = new ProtocolExecutor(nc, "batch", "exec-b", ["b-batch"]);
    expect((await exec.heartbeat()).status).toBe("ok");
  });
  afterAll(async () => {
    exec?.close();
    await nc?.close();
    await gateway?.close();
    await nats?.stop();
  });

  it("grants 20 concurrent claims with far fewer than 20 writes of the executor's record", async () => {
    const runId = (await gateway.http("POST", `/v1/sessions/${sessionId}/runs`)).body.run_id;
    const ids: string[] = [];
    for (let i = 0; i < 20; i++)
      ids.push((await gateway.http("POST", `/v1/runs/${runId}/tool-calls`, { tool_name: "work.do", arguments: { i } })).body.assignment.assignment_id);
    const jsm = await jetstreamManager(nc);
    const writes = async () => (await jsm.streams.info(`KV_${EXECUTION_BUCKETS.claims}`)).state.last_seq;
    const before = await writes();
    const replies = await Promise.all(ids.map((id) => exec.claim(id, 0)));
    expect(replies.map((r) => r.status)).toEqual(ids.map(() => "granted"));
    expect(await writes()).toBeLessThan(before + 10);
  });
});
