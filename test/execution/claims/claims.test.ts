import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { startTestNats, type TestNats } from "../../helpers/nats.js";
import { seedSession, startExecutionGateway, type TestGateway } from "../../helpers/execution-gateway.js";
import { ProtocolExecutor } from "../../helpers/protocol-executor.js";
import { until } from "../../helpers/until.js";
import { DEFAULT_EXECUTION_OPTIONS } from "../../../src/execution/execution.js";

const SCOPE = "race";
const LEASE_MS = 400;
/** The gateway's default bound on the claims one executor holds at once. */
const MAX_CLAIMS = DEFAULT_EXECUTION_OPTIONS.maxClaimsPerExecutor;

/** One gateway with its own server; `leaseMs` differs between the suites. */
function suite(name: string, leaseMs: number, body: (ctx: () => Ctx) => void): void {
  describe(name, () => {
    let ctx: Ctx;
    let nats: TestNats;
    beforeAll(async () => {
      nats = await startTestNats();
      const gw = await startExecutionGateway(nats.url, { leaseMs, reofferAfterMs: 2_000, sweepIntervalMs: 50 });
      const sessionId = await seedSession(gw.gateway.store, {
        scope: SCOPE,
        agent: "racer",
        tools: [{ name: "work.do", binding_id: "b-work", tool_kind: "write" }],
      });
      const conns = await Promise.all([0, 1, 2].map(() => connect({ servers: nats.url })));
      const executors = Array.from({ length: 10 }, (_, i) => new ProtocolExecutor(conns[i % conns.length]!, SCOPE, `exec-${i}`, ["b-work"]));
      for (const e of executors) expect((await e.heartbeat()).status).toBe("ok");
      ctx = { gw, conns, executors, sessionId };
    });
    afterAll(async () => {
      for (const e of ctx?.executors ?? []) e.close();
      for (const c of ctx?.conns ?? []) await c.close();
      await ctx?.gw.close();
      await nats?.stop();
    });
    body(() => ctx);
  });
}

interface Ctx {
  gw: TestGateway;
  conns: NatsConnection[];
  executors: ProtocolExecutor[];
  sessionId: string;
}

const newRun = async ({ gw, sessionId }: Ctx) => (await gw.http("POST", `/v1/sessions/${sessionId}/runs`)).body.run_id as string;
const newToolCall = async ({ gw }: Ctx, runId: string) =>
  (await gw.http("POST", `/v1/runs/${runId}/tool-calls`, { tool_name: "work.do", arguments: {} })).body.assignment.assignment_id as string;
const state = async ({ gw }: Ctx, id: string) => (await gw.http("GET", `/v1/assignments/${id}`)).body;

suite("claims: exactly one winner", 30_000, (ctx) => {
  it("gives the claim to exactly one of 10 concurrent executors, 100 times over", async () => {
    const runId = await newRun(ctx());
    // The claims won are never finished: an executor that has won its bound (the first to ask often
    // wins most rounds) is refused `too_many_claims` from then on, and only then.
    const held = new Map<string, number>();
    for (let round = 0; round < 100; round++) {
      const id = await newToolCall(ctx(), runId);
      const replies = await Promise.all(ctx().executors.map(async (e) => ({ executor: e.executorId, reply: await e.claim(id, 0) })));
      const granted = replies.filter((r) => r.reply.status === "granted");
      expect(granted, `round ${round}`).toHaveLength(1);
      const refusals = replies.flatMap(({ executor, reply }) => (reply.status === "refused" ? [{ executor, text: `${reply.code}: ${reply.reason}` }] : []));
      const unexpected = refusals.filter(
        ({ executor, text }) => !text.startsWith("already_claimed:") && !(text.startsWith("too_many_claims:") && (held.get(executor) ?? 0) >= MAX_CLAIMS),
      );
      expect(unexpected, `round ${round}: ${refusals.map((r) => `${r.executor} ${r.text}`).join("; ")}`).toEqual([]);
      expect(refusals).toHaveLength(9);
      const winner = granted[0]!.executor;
      held.set(winner, (held.get(winner) ?? 0) + 1);
    }
  });
});

suite("claims: leases", LEASE_MS, (ctx) => {
  it("returns an unconfirmed claim to the candidates after the lease, with the next generation", async () => {
    const runId = await newRun(ctx());
    const id = await newToolCall(ctx(), runId);
    const [first, second] = [ctx().executors[0]!, ctx().executors[1]!];
    const reply = await first.claim(id, 0);
    if (reply.status !== "granted") throw new Error("claim refused");

    const returned = await until(
      "the lease to expire",
      async () => {
        const a = await state(ctx(), id);
        return a.state === "pending" && a.generation === 1 ? a : undefined;
      },
      10_000,
    );
    expect(returned.executor_id).toBeNull();
    const candidate = await second.pullFor(id, 1);
    expect(candidate.generation).toBe(1);

    expect(await first.send(first.accepted(reply.grant))).toMatchObject({ status: "rejected", code: "lease_expired" });
    expect(await first.claim(id, 0)).toMatchObject({ status: "refused", code: "stale_generation" });
    const again = await second.claim(id, 1);
    expect(again.status).toBe("granted");
    if (again.status !== "granted") return;
    expect(again.grant.generation).toBe(1);
    expect(again.grant.claim_token).not.toBe(reply.grant.claim_token);
    // The old token proves nothing once the assignment went back: refused whatever the new claim does.
    expect(await first.send(first.receipt(reply.grant, { kind: "completed", result: {} }))).toMatchObject({ status: "rejected", code: "lease_expired" });
  });

  it("offers a candidate again when the executor that took it never claims", async () => {
    const runId = await newRun(ctx());
    const id = await newToolCall(ctx(), runId);
    const vanished = ctx().executors[2]!;
    await vanished.pullFor(id, 0); // taken and acknowledged, never claimed
    const again = await ctx().executors[3]!.pullFor(id, 1);
    expect(again.generation).toBe(1);
    expect(await vanished.claim(id, 0)).toMatchObject({ status: "refused", code: "stale_generation" });
    expect((await ctx().executors[3]!.claim(id, 1)).status).toBe("granted");
  });
});
