/**
 * Nesting through the gateway: what a gateway accepts from an executor it must be able to read back from
 * every record it stores it in (the receipt in its stream, the projection, the history and the assignment),
 * and a result too deep to accept is refused with its reason rather than stored and lost on the next read.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startExecutionFixture, type ExecutionFixture, type TestGateway } from "../helpers/execution-gateway.js";
import type { ProtocolExecutor } from "../helpers/protocol-executor.js";

const SCOPE = "prod";
const READ_TOOL = { scope: SCOPE, agent: "support-bot", tools: [{ name: "tasks.read", binding_id: "b-read" }] };

/** A result nested `levels` deep: `levels` arrays/objects, alternating, around a string. */
function nested(levels: number): unknown {
  let v: unknown = "leaf";
  for (let i = 0; i < levels; i++) v = i % 2 === 0 ? [v] : { k: v };
  return v;
}

describe("deeply nested results through the gateway", () => {
  let fx: ExecutionFixture, gw: TestGateway, exec: ProtocolExecutor, sessionId: string;
  beforeAll(async () => {
    fx = await startExecutionFixture({ ...READ_TOOL, executor: { id: "exec-1", start: "heartbeat" } });
    ({ gw, executor: exec, sessionId } = fx);
  });
  afterAll(() => fx?.close());

  /** A completed call whose result nests `levels` deep; returns the run, the assignment and the receipt's answer. */
  async function complete(levels: number) {
    const run = await gw.http("POST", `/v1/sessions/${sessionId}/runs`);
    const runId = run.body.run_id as string;
    const call = await gw.http("POST", `/v1/runs/${runId}/tool-calls`, { tool_name: "tasks.read", arguments: {} });
    expect(call.status, JSON.stringify(call.body)).toBe(201);
    const id = call.body.assignment.assignment_id as string;
    const candidate = await exec.pullFor(id);
    const reply = await exec.claim(id, candidate.generation);
    if (reply.status !== "granted") throw new Error(`claim refused: ${reply.code}`);
    expect((await exec.send(exec.accepted(reply.grant))).status).toBe("recorded");
    const answer = await exec.send(exec.receipt(reply.grant, { kind: "completed", result: nested(levels) }));
    return { runId, id, answer };
  }

  for (const levels of [40, 61, 62, 63]) {
    it(`a result nested ${levels} levels is readable in history and the assignment`, async () => {
      const { runId, id, answer } = await complete(levels);
      expect(answer.status).toBe("recorded");
      const history = await gw.http("GET", `/v1/runs/${runId}/history`);
      expect(history.status, JSON.stringify(history.body)).toBe(200);
      expect(history.body.tool_calls[0].context_preview).toMatchObject({ truncated: false, result: nested(levels) });
      const view = await gw.http("GET", `/v1/assignments/${id}`);
      expect(view.status, JSON.stringify(view.body)).toBe(200);
      expect(view.body.state).toBe("completed");
    });
  }
});

describe("deeply nested arguments under a raised body bound", () => {
  let fx: ExecutionFixture, gw: TestGateway, sessionId: string;
  beforeAll(async () => {
    fx = await startExecutionFixture({ ...READ_TOOL, executor: { id: "exec-1" }, env: { TOOLGATE_JSON_MAX_DEPTH: "200" } });
    ({ gw, sessionId } = fx);
  });
  afterAll(() => fx?.close());

  it("arguments accepted 150 levels deep are readable in the assignment and the history", async () => {
    const runId = (await gw.http("POST", `/v1/sessions/${sessionId}/runs`)).body.run_id as string;
    const args = { deep: nested(149) };
    const call = await gw.http("POST", `/v1/runs/${runId}/tool-calls`, { tool_name: "tasks.read", arguments: args });
    expect(call.status, JSON.stringify(call.body)).toBe(201);
    const view = await gw.http("GET", `/v1/assignments/${call.body.assignment.assignment_id}`);
    expect(view.status, JSON.stringify(view.body)).toBe(200);
    expect(view.body.arguments).toEqual(args);
    const history = await gw.http("GET", `/v1/runs/${runId}/history`);
    expect(history.status, JSON.stringify(history.body)).toBe(200);
    expect(history.body.tool_calls[0].arguments).toEqual(args);
  });
});
