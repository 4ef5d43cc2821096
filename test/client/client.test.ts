import { createServer as createHttpServer, type IncomingHttpHeaders } from "node:http";
import { createServer, type Socket } from "node:net";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GatewayError, ToolgateClient, operations, type OperationId } from "../../src/client/index.js";
import { ADMIN_KEY, startExecutionGateway, type TestGateway } from "../helpers/execution-gateway.js";
import { startTestNats, type TestNats } from "../helpers/nats.js";
import { ProtocolExecutor } from "../helpers/protocol-executor.js";
import { until } from "../helpers/until.js";

const SCOPE = "client-scope";
const AGENT = "client-agent";

/** The agent-side SDK against a real gateway, a real nats-server and a wire-protocol executor. */
describe("toolgate/client", () => {
  let nats: TestNats;
  let gw: TestGateway;
  let nc: NatsConnection;
  let executor: ProtocolExecutor;
  let client: ToolgateClient;
  let sessionId: string;
  let agentVersion: string;

  beforeAll(async () => {
    nats = await startTestNats();
    gw = await startExecutionGateway(nats.url);
    client = new ToolgateClient({ baseUrl: gw.baseUrl, apiKey: ADMIN_KEY });
    await client.createBinding({ binding_id: "notes-read", executor_scope: SCOPE, tool_kind: "read" });
    await client.createBinding({ binding_id: "notes-write", executor_scope: SCOPE, tool_kind: "write" });
    const tool = (name: string, binding_id: string) => ({
      name,
      description: `the ${name} tool`,
      binding_id,
      input_schema: { type: "object" },
      output_schema: { type: "object" },
    });
    await client.publishToolsetVersion("client-tools", { version: "v1", tools: [tool("notes.read", "notes-read"), tool("notes.write", "notes-write")] });
    agentVersion = (await client.publishAgentVersion(AGENT, { toolset: "client-tools", toolset_version: "v1", max_context_tokens: 100_000 })).agent_version;
    expect((await client.getAgentVersion(agentVersion)).toolset_version).toBe("v1");
    sessionId = (await client.createSession({ agent_version: agentVersion, subject: "user-1" })).session_id;
    expect((await client.listBindings()).bindings.map((b) => b.binding_id).sort()).toEqual(["notes-read", "notes-write"]);
    expect((await client.getBinding("notes-write")).tool_kind).toBe("write");
    expect((await client.listToolsetVersions("client-tools")).versions.map((v) => v.version)).toEqual(["v1"]);
    expect((await client.listAgentVersions(AGENT)).versions.map((v) => v.agent_version)).toEqual([agentVersion]);
    expect((await client.listSessions(AGENT)).sessions.map((s) => s.session_id)).toEqual([sessionId]);
    expect((await client.getSession(sessionId)).agent_version).toBe(agentVersion);
    nc = await connect({ servers: nats.url });
    executor = new ProtocolExecutor(nc, SCOPE, "client-executor", ["notes-read", "notes-write"]);
    await executor.heartbeat();
  });
  afterAll(async () => {
    executor?.close();
    await nc?.close();
    await gw?.close();
    await nats?.stop();
  });

  /**
   * `step`'s value and the Last-Event-ID of each run event stream the client opened meanwhile (it
   * calls the global fetch); `asked` fills while `step` runs.
   */
  async function eventStreamsAsked<T>(step: (asked: number[]) => Promise<T>): Promise<{ value: T; asked: number[] }> {
    const asked: number[] = [];
    const realFetch = globalThis.fetch;
    globalThis.fetch = ((input: Parameters<typeof fetch>[0], init?: RequestInit) => {
      if (String(input).endsWith("/events")) asked.push(Number(new Headers(init?.headers).get("last-event-id")));
      return realFetch(input, init);
    }) as typeof fetch;
    try {
      return { value: await step(asked), asked };
    } finally {
      globalThis.fetch = realFetch;
    }
  }

  /** Claims, accepts and completes an assignment the way an executor does. */
  async function complete(assignmentId: string, result: unknown, by = executor): Promise<void> {
    await by.heartbeat();
    const candidate = await by.pullFor(assignmentId);
    const reply = await by.claim(assignmentId, candidate.generation);
    if (reply.status !== "granted") throw new Error(`claim refused: ${reply.code}`);
    expect((await by.send(by.accepted(reply.grant))).status).toBe("recorded");
    expect((await by.send(by.receipt(reply.grant, { kind: "completed", result }))).status).toBe("recorded");
  }

  it("calls every route with the server's own declaration: same method, path and schema objects", () => {
    for (const [id, op] of Object.entries(operations) as [OperationId, (typeof operations)[OperationId]][]) {
      const route = gw.gateway.routes.find((r) => r.id === id);
      expect(route, id).toBeDefined();
      expect({ id, method: route!.method, path: route!.path }).toEqual({ id, method: op.method, path: op.path });
      expect(route!.response, `${id} response`).toBe(op.response);
      expect(route!.body, `${id} body`).toBe("body" in op ? op.body : undefined);
    }
  });

  it("callTool is idempotent by tool_call_id and result() waits over the event stream for the stored projection", async () => {
    const offered = await client.agentTools(agentVersion);
    expect(offered.anthropic().map((t) => t.name)).toEqual(["notes__read", "notes__write"]);
    const run = await client.createRun(sessionId);
    const call = await client.callTool(run.run_id, { tool_name: offered.toolName("notes__read"), arguments: { q: "x" }, tool_call_id: "call-1" });
    expect(call.created).toBe(true);
    const settled = call.result({ timeoutMs: 60_000 });
    await complete(call.assignmentId, { notes: ["a", "b"] });
    const answer = await settled;
    expect(answer.state).toBe("completed");
    expect(answer.context_preview).not.toBeNull();
    expect(JSON.stringify(answer.context_preview)).toContain("notes");

    const again = await client.callTool(run.run_id, { tool_name: "notes.read", arguments: { q: "x" }, tool_call_id: "call-1" });
    expect(again.created).toBe(false);
    expect(again.assignmentId).toBe(call.assignmentId);
    expect((await again.result()).context_preview).toEqual(answer.context_preview); // settled before: answered from the replayed events

    const history = await client.history(run.run_id);
    expect(history.tool_calls.map((t) => [t.tool_call_id, t.state])).toEqual([["call-1", "completed"]]);
    expect(history.tool_calls[0]!.context_preview).toEqual(answer.context_preview);

    const window = await client.reportUsage(run.run_id, { input_tokens: 1_000, prompt_text_bytes: 3_000 });
    expect(window.run_id).toBe(run.run_id);
    expect(await client.contextWindow(run.run_id)).toMatchObject({ must_compact: false, prompt_text_bytes: 3_000 });
    expect((await client.completeRun(run.run_id)).state).toBe("completed");
  });

  it("an agent loop's result() waits read the run's events after the newest the client read, not from the start", async () => {
    const run = await client.createRun(sessionId);
    const { asked } = await eventStreamsAsked(async () => {
      for (let i = 0; i < 3; i++) {
        const call = await client.callTool(run.run_id, { tool_name: "notes.read", arguments: { i }, tool_call_id: `loop-${i}` });
        const answered = call.result({ timeoutMs: 60_000 });
        await complete(call.assignmentId, { i });
        expect((await answered).state).toBe("completed");
      }
    });
    // The first from the run's start; each next one past the event messages of the calls before it (at
    // least the one telling its settlement; under store layout 7 a call answered at once is told in one).
    expect(asked).toHaveLength(3);
    expect(asked[0]).toBe(0);
    expect(asked[1]!).toBeGreaterThan(asked[0]!);
    expect(asked[2]!).toBeGreaterThan(asked[1]!);
  });

  it("taskResults answers a result already in history at once, and waits for the next one from the newest event the client read", async () => {
    const run = await client.createRun(sessionId);
    const submitted = async (toolCallId: string, taskRef: string) => {
      const call = await client.callTool(run.run_id, { tool_name: "notes.read", arguments: {}, tool_call_id: toolCallId });
      const reply = await executor.claim(call.assignmentId, (await executor.pullFor(call.assignmentId)).generation);
      if (reply.status !== "granted") throw new Error(`claim refused: ${reply.code}`);
      expect((await executor.send(executor.accepted(reply.grant))).status).toBe("recorded");
      const submission = executor.receipt(reply.grant, { kind: "submission", task_ref: taskRef, status: "queued" }, `${call.assignmentId}_sub`);
      expect((await executor.send(submission)).status).toBe("recorded");
      expect((await call.result({ timeoutMs: 60_000 })).state).toBe("submitted");
      return reply.grant;
    };
    const first = await submitted("task-a", "job-a");
    expect((await executor.send(executor.receipt(first, { kind: "completed", result: { a: 1 } }))).status).toBe("recorded");
    // Already in history: answered without an event stream.
    const held = await eventStreamsAsked(() => client.taskResults(run.run_id, 0));
    expect(held.value.map((t) => t.assignment_id)).toEqual([first.assignment_id]);
    expect(held.asked).toEqual([]);

    const second = await submitted("task-b", "job-b");
    const { asked } = await eventStreamsAsked(async (asked) => {
      const next = client.taskResults(run.run_id, 1, { timeoutMs: 60_000 });
      await until("the wait's event stream", () => (asked.length > 0 ? true : undefined));
      expect((await executor.send(executor.receipt(second, { kind: "completed", result: { b: 2 } }))).status).toBe("recorded");
      expect((await next).map((t) => t.assignment_id)).toEqual([second.assignment_id]);
    });
    // Past the run's events the client had read (both calls' waits), not from the start.
    expect(asked[0]).toBeGreaterThan(8);
  });

  it("resumes the event stream after a given event id", async () => {
    const run = await client.createRun(sessionId);
    await client.callTool(run.run_id, { tool_name: "notes.read", arguments: {}, tool_call_id: "call-events" });
    const controller = new AbortController();
    const firstTwo: number[] = [];
    for await (const { id } of client.runEvents(run.run_id, { signal: controller.signal })) {
      firstTwo.push(id);
      if (firstTwo.length === 2) break;
    }
    const [first, second] = firstTwo;
    for await (const { id } of client.runEvents(run.run_id, { after: first! })) {
      expect(id).toBe(second);
      break;
    }
    await client.cancelRun(run.run_id);
  });

  it("a result() wait ends by its timeout or its signal", async () => {
    const run = await client.createRun(sessionId);
    const call = await client.callTool(run.run_id, { tool_name: "notes.read", arguments: {}, tool_call_id: "never-claimed" });
    await expect(call.result({ timeoutMs: 200 })).rejects.toMatchObject({ name: "TimeoutError" });
    const controller = new AbortController();
    const waiting = call.result({ signal: controller.signal });
    controller.abort(new Error("the user went away"));
    await expect(waiting).rejects.toThrow("the user went away");
    const cancelled = await client.cancelRun(run.run_id);
    expect(cancelled.state).toBe("cancelled");
    expect((await call.result()).state).toBe("withdrawn");
  });

  it("the operations: task cancel, compensation, detach; and the dry-run", async () => {
    const run = await client.createRun(sessionId);
    const write = await client.callTool(run.run_id, { tool_name: "notes.write", arguments: {}, tool_call_id: "write-1" });
    await complete(write.assignmentId, { written: true });
    expect((await write.result()).state).toBe("completed");
    const { created, compensation } = await client.compensate(write.assignmentId);
    expect(created).toBe(true);
    expect(compensation.compensates).toBe(write.assignmentId);

    const task = await client.callTool(run.run_id, { tool_name: "notes.read", arguments: {}, tool_call_id: "task-1" });
    const candidate = await executor.pullFor(task.assignmentId);
    const reply = await executor.claim(task.assignmentId, candidate.generation);
    if (reply.status !== "granted") throw new Error(reply.code);
    await executor.send(executor.accepted(reply.grant));
    const asked = await client.cancelTask(task.assignmentId, "no longer needed");
    expect(asked.task_cancel?.reason).toBe("no longer needed");

    const detached = await client.detachExecutor("client-executor", SCOPE);
    expect(detached).toMatchObject({ executor_id: "client-executor", scope: SCOPE });
    expect([...detached.reconciliation_required, ...detached.released, ...detached.retried]).toContain(task.assignmentId);

    const preview = await client.dryRun({
      agent_version: agentVersion,
      tool_name: "notes.read",
      mock_receipts: [{ receipt_id: "r1", kind: "completed", result: { n: 1 } }],
    });
    expect(preview.execution_verified).toBe(false);
    expect(preview.context_preview).not.toBeNull();
    await client.cancelRun(run.run_id);
  });

  it("a refusal is a GatewayError with the catalogue code, not retried", async () => {
    const error = await client.getRun("no-such-run").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(GatewayError);
    expect(error).toMatchObject({ status: 404, code: "run_not_found" });
    const invalid = await client.createBinding({ binding_id: "bad binding", executor_scope: SCOPE, tool_kind: "read" }).catch((e: unknown) => e);
    expect(invalid).toMatchObject({ status: 400, code: "validation_failed" });
    expect((invalid as GatewayError).details?.[0]?.path).toContain("binding_id");
  });

  it("result() and the event stream survive a gateway restart: resumed with Last-Event-ID once it is back, nothing missed or repeated", async () => {
    const run = await client.createRun(sessionId);
    const call = await client.callTool(run.run_id, { tool_name: "notes.read", arguments: { q: "restart" }, tool_call_id: "restart-1" });
    // Each open event stream is an ordered consumer of TG_EVENTS on the gateway's side.
    const jsm = await jetstreamManager(nc);
    const readers = async () => (await jsm.streams.info("TG_EVENTS")).state.consumer_count;
    const before = await readers();
    const settled = call.result({ timeoutMs: 60_000 });
    const seen: number[] = [];
    const told: string[] = [];
    const followed = (async () => {
      for await (const { id, event } of client.runEvents(run.run_id, { timeoutMs: 60_000 })) {
        seen.push(id);
        told.push(JSON.stringify(event));
        if (event.type === "assignment" && event.assignment_id === call.assignmentId && event.to === "completed") return event;
      }
    })();
    await until("both event streams to be open", async () => ((await readers()) >= before + 2 ? true : undefined));

    const port = new URL(gw.baseUrl).port;
    await gw.close();
    // While the gateway is down, its port resets every connection: the client must back off and try again.
    const attempts: Socket[] = [];
    const down = createServer((socket) => void attempts.push(socket.resetAndDestroy()));
    await new Promise<void>((listening) => down.listen(Number(port), "127.0.0.1", listening));
    await until("two refused reconnects of each stream", () => (attempts.length >= 4 ? true : undefined));
    await new Promise<void>((closed) => down.close(() => closed()));
    gw = await startExecutionGateway(nats.url, {}, { TOOLGATE_HTTP_PORT: port });
    expect(new URL(gw.baseUrl).port).toBe(port);
    // An executor of its own: the operations test detaches the shared one, which then stays offline for a presence TTL.
    const after = new ProtocolExecutor(nc, SCOPE, "client-executor-2", ["notes-read", "notes-write"]);
    try {
      await complete(call.assignmentId, { notes: ["after the restart"] }, after);
    } finally {
      after.close();
    }

    const answer = await settled;
    expect(answer.state).toBe("completed");
    expect(JSON.stringify(answer.context_preview)).toContain("after the restart");
    expect((await followed)?.to).toBe("completed");
    // In order (the events of one message before its last carry the id before it), none repeated.
    expect(seen).toEqual([...seen].sort((a, b) => a - b));
    expect(new Set(told).size).toBe(told.length);
    expect(seen.length).toBeGreaterThanOrEqual(4); // the run, the call created, accepted (running), completed
  });
});

describe("toolgate/client retries a 429 honouring Retry-After", () => {
  let nats: TestNats;
  let gw: TestGateway;

  beforeAll(async () => {
    nats = await startTestNats();
    gw = await startExecutionGateway(nats.url, {}, { TOOLGATE_RATE_LIMIT_RPS: "5", TOOLGATE_RATE_LIMIT_BURST: "1" });
  });
  afterAll(async () => {
    await gw?.close();
    await nats?.stop();
  });

  it("without retries the 429 surfaces as rate_limited with the wait; with them the same calls succeed", async () => {
    const once = new ToolgateClient({ baseUrl: gw.baseUrl, apiKey: ADMIN_KEY, retry: { retries: 0 } });
    const answers = await Promise.allSettled([1, 2, 3].map(() => once.getSession("ses-none")));
    const limited = answers.flatMap((a) => (a.status === "rejected" && a.reason instanceof GatewayError && a.reason.status === 429 ? [a.reason] : []));
    expect(limited.length).toBeGreaterThan(0);
    expect(limited[0]).toMatchObject({ code: "rate_limited" });
    expect(limited[0]!.retryAfterSeconds).toBeGreaterThan(0);

    const patient = new ToolgateClient({ baseUrl: gw.baseUrl, apiKey: ADMIN_KEY, retry: { retries: 10 } });
    const retried = await Promise.allSettled([1, 2, 3].map(() => patient.getSession("ses-none")));
    // Every call got past the rate limit to the gateway's real answer: no such session.
    expect(retried.map((a) => (a.status === "rejected" ? (a.reason as GatewayError).code : "answered"))).toEqual([
      "session_not_found",
      "session_not_found",
      "session_not_found",
    ]);
  });
});

describe("toolgate/client on a connection that goes silent", () => {
  it("takes an event stream silent for eventIdleMs for dead and resumes it with Last-Event-ID", async () => {
    // A peer that sends one event, then nothing, not even a heartbeat, and never closes: what a vanished host looks like.
    const requests: IncomingHttpHeaders[] = [];
    const silent = createHttpServer((req, res) => {
      requests.push(req.headers);
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(
        `id: ${7 + requests.length}\ndata: ${JSON.stringify({ type: "run", run_id: "run_silent", state: "active", at: "2026-12-03T16:00:00.000Z" })}\n\n`,
      );
    });
    await new Promise<void>((listening) => silent.listen(0, "127.0.0.1", listening));
    const { port } = silent.address() as { port: number };
    const client = new ToolgateClient({ baseUrl: `http://127.0.0.1:${port}`, apiKey: ADMIN_KEY, eventIdleMs: 200, retry: { initialDelayMs: 10 } });
    const ids: number[] = [];
    try {
      for await (const { id } of client.runEvents("run_silent", { after: 7, timeoutMs: 30_000 })) if (ids.push(id) === 3) break;
    } finally {
      silent.closeAllConnections();
      silent.close();
    }
    expect(ids).toEqual([8, 9, 10]);
    expect(requests.map((h) => h["last-event-id"])).toEqual(["7", "8", "9"]);
  });
});
