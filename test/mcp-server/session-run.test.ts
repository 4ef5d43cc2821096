import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sessionMcpRunId } from "../../src/execution/model/ids.js";
import { createToolCall } from "../../src/mcp-server/session-tools.js";
import { startExecutionFixture, type ExecutionFixture } from "../helpers/execution-gateway.js";
import { DirectReads } from "../helpers/direct-reads.js";

/** The run an MCP session's tool calls go to: made on the first call, then remembered by the gateway. */
describe("an MCP session's run", () => {
  let fx: ExecutionFixture;
  let runReads: DirectReads;

  beforeAll(async () => {
    fx = await startExecutionFixture({
      scope: "mcprun",
      agent: "mcprun-bot",
      tools: [{ name: "m.read", binding_id: "b-mcprun" }],
      executor: { id: "exec-mcprun", start: "heartbeat" },
    });
    runReads = await DirectReads.of(fx.nats.url, "tg_runs");
  });
  afterAll(async () => {
    await runReads?.close();
    await fx?.close();
  });

  /** Creates a tool call in the session's run, and says how many reads of the run it made. */
  const call = async () => {
    const { value: created, reads } = await runReads.during(() =>
      createToolCall(fx.gw.gateway.execution, fx.sessionId, sessionMcpRunId(fx.sessionId), { name: "m.read", arguments: {} }),
    );
    if (!("call" in created)) throw new Error(`no call created: ${JSON.stringify(created.answer)}`);
    return { call: created.call, reads };
  };

  it("is made by the first call and not read again by the next ones", async () => {
    const first = await call();
    expect(first.call.run_id).toBe(sessionMcpRunId(fx.sessionId));
    const next = await call();
    const third = await call();
    expect(next.call.run_id).toBe(first.call.run_id);
    expect(next.call.assignment_id).not.toBe(third.call.assignment_id);
    expect([next.reads, third.reads]).toEqual([0, 0]);
    // Both calls are listed on the one run.
    const run = await fx.gw.api("GET", `/v1/runs/${first.call.run_id}`);
    expect(run.assignment_ids).toEqual(expect.arrayContaining([first.call.assignment_id, next.call.assignment_id, third.call.assignment_id]));
  });

  it("still refuses a call once the run has ended", async () => {
    const { call: made } = await call();
    await fx.gw.api("POST", `/v1/runs/${made.run_id}:cancel`, { reason: "done" });
    const refused = await createToolCall(fx.gw.gateway.execution, fx.sessionId, made.run_id, { name: "m.read", arguments: {} });
    expect(refused).toMatchObject({ answer: { isError: true } });
    expect(JSON.stringify(refused)).toContain("run_terminated");
  });
});
