import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type { WatchEntry } from "../../../src/execution/model/records.js";
import type { ExecutionOptions } from "../../../src/execution/execution.js";
import { startTestNats, type TestNats } from "../../helpers/nats.js";
import { seedSession, startExecutionGateway, type TestGateway } from "../../helpers/execution-gateway.js";
import { ProtocolExecutor } from "../../helpers/protocol-executor.js";
import { watchReader } from "../../helpers/watches.js";

/**
 * Which watch looks after a claim. A claim made well before its offer's watch comes due relies on
 * that watch (one write less per tool call); one that the offer's watch would reach too late (a
 * lease shorter than the time to it, a later generation) writes its own, due at the lease's end or
 * the first holder check. Through a real gateway and nats-server; the watch bucket is read directly.
 */
const SCOPE = "watching";

function suite(name: string, execution: Partial<ExecutionOptions>, body: (ctx: () => Ctx) => void): void {
  describe(name, () => {
    let nats: TestNats;
    let ctx: Ctx;
    beforeAll(async () => {
      nats = await startTestNats();
      const gw = await startExecutionGateway(nats.url, execution);
      const sessionId = await seedSession(gw.gateway.store, { scope: SCOPE, agent: "watcher", tools: [{ name: "work.do", binding_id: "b-watch" }] });
      const nc = await connect({ servers: nats.url });
      const exec = new ProtocolExecutor(nc, SCOPE, "exec-watch", ["b-watch"]);
      expect((await exec.heartbeat()).status).toBe("ok");
      const watches = await watchReader(nc);
      const runId: string = (await gw.http("POST", `/v1/sessions/${sessionId}/runs`)).body.run_id;
      ctx = { gw, nc, exec, watches, runId };
    });
    afterAll(async () => {
      ctx?.exec.close();
      await ctx?.nc.close();
      await ctx?.gw.close();
      await nats?.stop();
    });
    body(() => ctx);
  });
}

interface Ctx {
  gw: TestGateway;
  nc: NatsConnection;
  exec: ProtocolExecutor;
  watches: Awaited<ReturnType<typeof watchReader>>;
  runId: string;
}

/** A tool call, its candidate taken and claimed; the watch before and after the claim. */
async function claimOne({ gw, exec, watches, runId }: Ctx) {
  const created = await gw.http("POST", `/v1/runs/${runId}/tool-calls`, { tool_name: "work.do", arguments: {} });
  expect(created.status).toBe(201);
  const a = created.body.assignment;
  const candidate = await exec.pullFor(a.assignment_id);
  const before = await watches(a.assignment_id);
  const reply = await exec.claim(a.assignment_id, candidate.generation);
  if (reply.status !== "granted") throw new Error(`claim refused: ${reply.code}`);
  const after = await watches(a.assignment_id);
  return { assignmentId: a.assignment_id as string, grant: reply.grant, before: before!, after: after! };
}

const dueOf = (entry: { value: WatchEntry }) => entry.value.due_at;

suite("a claim soon after its tool call (lease 30 s, creation watch due after 10 s)", { leaseMs: 30_000, dispatchGraceMs: 10_000 }, (ctx) => {
  it("writes no watch: the offer's watch, due first, stands for it and then looks after the lease and the holder", async () => {
    const { before, after } = await claimOne(ctx());
    expect(after.revision).toBe(before.revision);
    expect(dueOf(after)).toBeLessThan(Date.now() + 10_000);
  });
});

suite("a claim whose lease ends before the offer's watch comes due (lease 3 s)", { leaseMs: 3_000, dispatchGraceMs: 10_000 }, (ctx) => {
  it("writes its own watch at the lease's end", async () => {
    const { grant, before, after } = await claimOne(ctx());
    expect(after.revision).toBeGreaterThan(before.revision);
    expect(dueOf(after)).toBe(grant.lease_expires_at);
  });
});
