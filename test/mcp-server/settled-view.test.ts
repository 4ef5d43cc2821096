import { getEventListeners } from "node:events";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { settledView } from "../../src/mcp-server/settled-view.js";
import { createToolCall } from "../../src/mcp-server/session-tools.js";
import { sessionMcpRunId } from "../../src/execution/model/ids.js";
import type { AssignmentView } from "../../src/execution/runs/views.js";
import { startExecutionFixture, type ExecutionFixture } from "../helpers/execution-gateway.js";
import { DirectReads } from "../helpers/direct-reads.js";

/**
 * The wait behind an MCP `tools/call`: the run's events tell it when to read the record, and no
 * consumer is made for it; an event it never got only delays the answer until the record is read again.
 */
describe("waiting for a tool call's answer", () => {
  let fx: ExecutionFixture;
  let spy: NatsConnection;
  let consumersMade = 0;
  let assignmentReads: DirectReads;

  beforeAll(async () => {
    fx = await startExecutionFixture({
      scope: "settle",
      agent: "settle-bot",
      tools: [{ name: "s.read", binding_id: "b-settle" }],
      executor: { id: "exec-settle", start: "heartbeat" },
    });
    spy = await connect({ servers: fx.nats.url });
    spy.subscribe("$JS.API.CONSUMER.CREATE.>", { callback: () => void consumersMade++ });
    await spy.flush();
    assignmentReads = await DirectReads.of(fx.nats.url, "tg_assignments");
  });
  afterAll(async () => {
    await spy?.close();
    await assignmentReads?.close();
    await fx?.close();
  });

  const sources = () => ({ history: fx.gw.gateway.execution.history, events: fx.gw.gateway.execution.events });
  const newCall = async () => {
    const runId = (await fx.gw.api("POST", `/v1/sessions/${fx.sessionId}/runs`)).run_id as string;
    const id = (await fx.gw.api("POST", `/v1/runs/${runId}/tool-calls`, { tool_name: "s.read", arguments: {} })).assignment.assignment_id as string;
    return { run_id: runId, assignment_id: id };
  };
  /** Claims, confirms, reports one progress and completes the call as its executor. */
  const complete = async (id: string) => {
    const reply = await fx.executor.claim(id, (await fx.executor.pullFor(id)).generation);
    if (reply.status !== "granted") throw new Error(`claim refused: ${reply.code}`);
    expect((await fx.executor.send(fx.executor.accepted(reply.grant))).status).toBe("recorded");
    expect((await fx.executor.send(fx.executor.receipt(reply.grant, { kind: "progress", seq: 1, progress: { half: true } }))).status).toBe("recorded");
    expect((await fx.executor.send(fx.executor.receipt(reply.grant, { kind: "completed", result: { done: true } }))).status).toBe("recorded");
  };

  it("answers with the completed call and its progress, without making a consumer or leaving a listener on the signal", async () => {
    const call = await newCall();
    const progress: AssignmentView["progress"] = [];
    await fx.nc.flush();
    const before = consumersMade;
    // A signal that outlives the wait, as an MCP session's does.
    const session = new AbortController().signal;
    const answered = settledView(sources(), call, session, (p) => progress.push(p));
    await complete(call.assignment_id);
    const view = await answered;
    expect(view).toMatchObject({ state: "completed", context_preview: { result: { done: true } } });
    expect(progress.map((p) => p.progress)).toEqual([{ half: true }]);
    await spy.flush();
    expect(consumersMade).toBe(before);
    expect(getEventListeners(session, "abort")).toHaveLength(0);
  });

  it("confirms the settling event on the record this gateway wrote, without reading it again", async () => {
    const call = await newCall();
    const history = fx.gw.gateway.execution.history;
    // The reads each look at the record makes, after the first (made before any event).
    const laterReads: number[] = [];
    let looks = 0;
    const counted = {
      assignment: async (...args: Parameters<typeof history.assignment>) => {
        const first = looks++ === 0;
        const { value, reads } = await assignmentReads.during(() => history.assignment(...args));
        if (!first) laterReads.push(reads);
        return value;
      },
    } as unknown as typeof history;
    const answered = settledView({ history: counted, events: fx.gw.gateway.execution.events }, call, new AbortController().signal, () => undefined);
    await complete(call.assignment_id);
    expect(await answered).toMatchObject({ state: "completed", context_preview: { result: { done: true } } });
    // Woken by the events (progress, then completed): the completed record, remembered, answers.
    expect(laterReads.length).toBeGreaterThan(0);
    expect(laterReads.every((n) => n === 0)).toBe(true);
  });

  it("waits for a call made after its run's events were subscribed to without reading it before an event", async () => {
    // As an MCP tools/call that waits: subscribed, then created; the wait starts from the state the creation wrote.
    const execution = fx.gw.gateway.execution;
    const progress: AssignmentView["progress"] = [];
    const { value: view, reads } = await assignmentReads.during(async () => {
      const created = await createToolCall(execution, fx.sessionId, sessionMcpRunId(fx.sessionId), { name: "s.read", arguments: {} }, { waited: true });
      if (!("call" in created)) throw new Error(`no call created: ${JSON.stringify(created.answer)}`);
      expect(created.opened?.created).toBe("pending");
      const answered = settledView(sources(), created.call, new AbortController().signal, (p) => progress.push(p), { opened: created.opened });
      await complete(created.call.assignment_id);
      return answered;
    });
    expect(view).toMatchObject({ state: "completed", context_preview: { result: { done: true } } });
    expect(progress.map((p) => p.progress)).toEqual([{ half: true }]);
    // Created, claimed, confirmed, reported and completed by this gateway: no read of the record at all
    // (the wait read it once, before any event, when it subscribed after the creation).
    expect(reads).toBe(0);
  });

  it("answers when the events never reach it, by reading the record again after a quiet spell", async () => {
    const call = await newCall();
    const progress: AssignmentView["progress"] = [];
    // Subscribed to another run's events: none of this call's ever arrives.
    const deaf = { ...call, run_id: (await newCall()).run_id };
    const answered = settledView(sources(), deaf, new AbortController().signal, (p) => progress.push(p), { recheckMs: 200 });
    await complete(call.assignment_id);
    expect(await answered).toMatchObject({ state: "completed" });
    // The progress missed with the events is read with the record.
    expect(progress.map((p) => p.progress)).toEqual([{ half: true }]);
  });

  it("resolves undefined once aborted", async () => {
    const call = await newCall();
    const abort = new AbortController();
    const answered = settledView(sources(), call, abort.signal, () => undefined);
    abort.abort();
    expect(await answered).toBeUndefined();
  });
});
