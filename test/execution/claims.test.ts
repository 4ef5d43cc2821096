import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { startTestNats, type TestNats } from "../helpers/nats.js";
import { seedSession, startTestGateway, type TestGateway } from "../helpers/execution-gateway.js";
import { ProtocolExecutor, eventually } from "../helpers/protocol-executor.js";

const SCOPE = "race";
const LEASE_MS = 400;

describe("claims: uniqueness and leases", () => {
  let nats: TestNats;
  let gw: TestGateway;
  let conns: NatsConnection[];
  let executors: ProtocolExecutor[];
  let sessionId: string;

  beforeAll(async () => {
    nats = await startTestNats();
    gw = await startTestGateway(nats.url, { leaseMs: LEASE_MS, sweepIntervalMs: 50 });
    sessionId = await seedSession(gw.gateway.store, { scope: SCOPE, agent: "racer", tools: [{ name: "work.do", binding_id: "b-work", tool_kind: "write" }] });
    conns = await Promise.all([0, 1, 2].map(() => connect({ servers: nats.url })));
    executors = Array.from({ length: 10 }, (_, i) => new ProtocolExecutor(conns[i % conns.length]!, SCOPE, `exec-${i}`, ["b-work"]));
    for (const e of executors) expect((await e.heartbeat()).status).toBe("ok");
  });
  afterAll(async () => {
    for (const e of executors ?? []) e.close();
    for (const c of conns ?? []) await c.close();
    await gw?.close();
    await nats?.stop();
  });

  const newRun = async () => (await gw.http("POST", `/v1/sessions/${sessionId}/runs`)).body.run_id as string;
  const newToolCall = async (runId: string) => (await gw.http("POST", `/v1/runs/${runId}/tool-calls`, { tool_name: "work.do", arguments: {} })).body.assignment.assignment_id as string;
  const state = async (id: string) => (await gw.http("GET", `/v1/assignments/${id}`)).body;

  it("gives the claim to exactly one of 10 concurrent executors, 100 times over", async () => {
    const runId = await newRun();
    for (let round = 0; round < 100; round++) {
      const id = await newToolCall(runId);
      const replies = await Promise.all(executors.map((e) => e.claim(id, 0)));
      const granted = replies.flatMap((r, i) => (r.status === "granted" ? [{ grant: r.grant, exec: executors[i]! }] : []));
      expect(granted, `round ${round}`).toHaveLength(1);
      expect(replies.filter((r) => r.status === "refused" && r.code === "already_claimed")).toHaveLength(9);
      // Confirm it, so the short lease of this suite does not send it back.
      const { grant, exec } = granted[0]!;
      expect((await exec.send(exec.receipt(grant, { kind: "accepted", operation_key: grant.operation_key }))).status).toBe("recorded");
    }
  });

  it("returns an unconfirmed claim to the candidates after the lease, with the next generation", async () => {
    const runId = await newRun();
    const id = await newToolCall(runId);
    const [first, second] = [executors[0]!, executors[1]!];
    const reply = await first.claim(id, 0);
    if (reply.status !== "granted") throw new Error("claim refused");

    const returned = await eventually(async () => {
      const a = await state(id);
      return a.state === "pending" && a.generation === 1 ? a : undefined;
    }, 10_000, "the lease to expire");
    expect(returned.executor_id).toBeNull();
    const candidate = await second.pullFor(id, 1);
    expect(candidate.generation).toBe(1);

    expect(await first.send(first.receipt(reply.grant, { kind: "accepted", operation_key: reply.grant.operation_key }))).toMatchObject({ status: "rejected", code: "lease_expired" });
    expect(await first.claim(id, 0)).toMatchObject({ status: "refused", code: "stale_generation" });
    const again = await second.claim(id, 1);
    expect(again.status).toBe("granted");
    if (again.status !== "granted") return;
    expect(again.grant.generation).toBe(1);
    expect(again.grant.claim_token).not.toBe(reply.grant.claim_token);
    expect((await second.send(second.receipt(again.grant, { kind: "accepted", operation_key: again.grant.operation_key }))).status).toBe("recorded");
    // The old token still proves nothing once another claim holds the assignment.
    expect(await first.send(first.receipt(reply.grant, { kind: "completed", result: {} }))).toMatchObject({ status: "rejected", code: "lease_expired" });
    expect(await second.send(second.receipt(again.grant, { kind: "completed", result: { by: "second" } }))).toMatchObject({ status: "recorded" });
    expect(await state(id)).toMatchObject({ state: "completed", executor_id: "exec-1", generation: 1 });
  });
});
