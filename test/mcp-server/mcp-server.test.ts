import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { promisify } from "node:util";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client as ModernClient, StreamableHTTPClientTransport as ModernTransport, type JSONRPCMessage } from "@modelcontextprotocol/client";
import { createTaskSessionFromClient, type JsonRpcResponse, type RawClientDispatch, type TaskEnabledSession } from "@modelcontextprotocol/ext-tasks/client";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema, CreateTaskResultSchema, ErrorCode, McpError, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { canonicalJson } from "../../src/budget/canonical-json.js";
import { TOOL_CALL_ID_META } from "../../src/mcp-server/session-tools.js";
import { BusinessCancelled, BusinessFailure, ToolRunner, type ToolContext } from "../../src/runner/index.js";
import { FAST_RUNNER_TIMING } from "../runner/helpers/tasks-agent.js";
import { ADMIN_KEY, SCOPED_KEY, seedSession, startExecutionGateway, type TestGateway } from "../helpers/execution-gateway.js";
import { startTestNats, type TestNats } from "../helpers/nats.js";
import { registerExecutor } from "../helpers/registry.js";
import { until } from "../helpers/until.js";
import { DirectReads } from "../helpers/direct-reads.js";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { onAbort } from "../helpers/abort.js";

/**
 * toolgate as an MCP server, through the official MCP client (Client + Streamable HTTP transport)
 * against a real gateway on a real nats-server, with a real executor (the ToolRunner SDK on SQLite)
 * whose handlers keep their own ledger of executions.
 */
type WriteArgs = { key: string; mode: "ok" | "fail" | "wait" | "explode" | "forbidden" };

const BIG_BYTES = 200 * 1024;
const BUDGET = 16_384;

describe("toolgate as an MCP server", () => {
  let nats: TestNats;
  let gw: TestGateway;
  let nc: NatsConnection;
  let runner: ToolRunner;
  let dir: string;
  let sessionId: string;
  /** The executor's ledger: how many times the business ran, per key. */
  const executions = new Map<string, number>();
  const gates = new Map<string, () => void>();
  const clients: Client[] = [];

  beforeAll(async () => {
    nats = await startTestNats();
    gw = await startExecutionGateway(nats.url, { sweepIntervalMs: 200 });
    sessionId = await seedSession(gw.gateway.store, {
      scope: "mcp",
      agent: "mcp-agent",
      tools: [
        { name: "notes.find", binding_id: "mcp-find", input_schema: { type: "object", required: ["q"], properties: { q: { type: "string" } } } },
        { name: "notes.dump", binding_id: "mcp-dump", max_result_context_bytes: BUDGET },
        { name: "notes.image", binding_id: "mcp-image" },
        { name: "notes.write", binding_id: "mcp-write", tool_kind: "write" },
        { name: "notes.report", binding_id: "mcp-report" },
      ],
    });
    nc = await connect({ servers: nats.url });
    await registerExecutor(nc, { executor_id: "exec-mcp", scope: "mcp", bindings: ["mcp-find", "mcp-dump", "mcp-image", "mcp-write", "mcp-report"] });
    dir = mkdtempSync(join(tmpdir(), "toolgate-mcp-"));
    runner = await ToolRunner.start({
      natsUrl: nats.url,
      executorId: "exec-mcp",
      scope: "mcp",
      store: join(dir, "runner.db"),
      logger: pino({ level: "silent" }),
      // The product refuses a grant it does not allow: a `refused` receipt, nothing executed.
      authorize: (grant) => ((grant.arguments as Partial<WriteArgs>).mode === "forbidden" ? { allowed: false, reason: "not your notebook" } : true),
      ...FAST_RUNNER_TIMING,
      tools: {
        "notes.find": { kind: "read", bindingId: "mcp-find", handler: (ctx: ToolContext<{ q: string }>) => ({ found: [`note about ${ctx.arguments.q}`] }) },
        "notes.dump": {
          kind: "read",
          bindingId: "mcp-dump",
          handler: () => ({ rows: Array.from({ length: BIG_BYTES / 64 }, (_, i) => `row ${i} `.padEnd(61, "x")) }),
        },
        "notes.image": {
          kind: "read",
          bindingId: "mcp-image",
          handler: () => ({
            content: [
              { type: "text", text: "a red dot" },
              { type: "image", data: "iVBORw0KGgo=", mimeType: "image/png" },
            ],
          }),
        },
        "notes.write": {
          kind: "write",
          bindingId: "mcp-write",
          handler: async (ctx: ToolContext<WriteArgs>) => {
            const { key, mode } = ctx.arguments;
            executions.set(key, (executions.get(key) ?? 0) + 1);
            if (mode === "fail") throw new BusinessFailure("no_room", "the notebook is full");
            // Anything else thrown leaves the outcome unknown: the runner reports reconciliation_required.
            if (mode === "explode") throw new Error("connection lost after the write");
            if (mode === "wait") {
              await ctx.progress({ step: "started" });
              await new Promise<void>((resolve, reject) => {
                gates.set(key, resolve);
                onAbort(ctx.signal, () => reject(new BusinessCancelled("stopped as asked")));
              });
            }
            return { written: key };
          },
        },
        "notes.report": {
          kind: "read",
          bindingId: "mcp-report",
          handler: (ctx: ToolContext<{ title: string }>) =>
            ctx.submit({ task_ref: `report-${ctx.arguments.title}`, status: `report '${ctx.arguments.title}' queued` }),
        },
      },
    });
  });

  afterAll(async () => {
    for (const gate of gates.values()) gate();
    for (const c of clients) await c.close().catch(() => undefined);
    await runner?.close({ deadlineMs: 1_000 });
    await nc?.close();
    await gw?.close();
    await nats?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const endpoint = () => new URL(`${gw.baseUrl}/v1/sessions/${sessionId}/mcp`);
  const connectClient = async (key = ADMIN_KEY): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> => {
    const transport = new StreamableHTTPClientTransport(endpoint(), { requestInit: { headers: { authorization: `Bearer ${key}` } } });
    const client = new Client({ name: "toolgate-test", version: "1.0.0" });
    await client.connect(transport);
    clients.push(client);
    return { client, transport };
  };
  const call = (
    client: Client,
    name: string,
    args: unknown,
    key?: string,
    options?: { signal?: AbortSignal; onprogress?: (p: { progress: number; message?: string }) => void },
  ) =>
    client.callTool(
      { name, arguments: args as Record<string, unknown>, ...(key ? { _meta: { [TOOL_CALL_ID_META]: key } } : {}) },
      undefined,
      options,
    ) as Promise<CallToolResult>;
  const assignmentOf = (result: CallToolResult) => result._meta?.["io.toolgate/assignment_id"] as string;
  const getAssignment = async (id: string) => (await gw.http("GET", `/v1/assignments/${id}`)).body;
  const textOf = (result: CallToolResult) => (result.content[0] as { type: "text"; text: string }).text;
  const errorOf = (result: CallToolResult) => JSON.parse(textOf(result)).error as { code: string; message: string; details?: unknown };
  /** The assignment of the session's MCP run made for tool call `key`, once it is running (its business started). */
  const runningCall = async (key: string) => {
    await until(`${key} to start`, () => (gates.has(key) ? true : undefined));
    const history = await until("the MCP run", async () => {
      const runs = (await gw.http("GET", `/v1/runs/${await mcpRunId()}/history`)).body;
      return runs?.tool_calls?.find((t: { tool_call_id: string }) => t.tool_call_id === key);
    });
    return history.assignment_id as string;
  };
  let runId: string | undefined;
  const mcpRunId = async (): Promise<string> => {
    if (runId) return runId;
    const { client } = await connectClient();
    const result = await call(client, "notes.find", { q: "run" });
    runId = (await getAssignment(assignmentOf(result))).run_id;
    return runId!;
  };

  it("lists the pinned toolset's tools with schemas and annotations from the bindings", async () => {
    const { client } = await connectClient();
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(["notes.dump", "notes.find", "notes.image", "notes.report", "notes.write"]);
    const find = tools.find((t) => t.name === "notes.find")!;
    expect(find.description).toBe("test tool notes.find");
    expect(find.inputSchema).toEqual({ type: "object", required: ["q"], properties: { q: { type: "string" } } });
    expect(find.outputSchema?.type).toBe("object");
    expect(find.annotations).toEqual({ readOnlyHint: true, destructiveHint: false, idempotentHint: true });
    expect(tools.find((t) => t.name === "notes.write")!.annotations).toEqual({ readOnlyHint: false, destructiveHint: true, idempotentHint: false });
  });

  it("answers a small call with the stored projection, text and structured", async () => {
    const { client } = await connectClient();
    const result = await call(client, "notes.find", { q: "tea" }, "find-tea");
    expect(result.isError).toBeFalsy();
    const stored = await getAssignment(assignmentOf(result));
    expect(stored.tool_call_id).toBe("find-tea");
    expect(stored.context_preview.truncated).toBe(false);
    expect(textOf(result)).toBe(canonicalJson(stored.context_preview.result));
    expect(result.structuredContent).toEqual({ found: ["note about tea"] });
  });

  it("answers a call that submits a background task with the submission the history shows; the task's result comes later, in history", async () => {
    const { client } = await connectClient();
    const result = await call(client, "notes.report", { title: "q3" }, "report-q3");
    expect(result.isError).toBeFalsy();
    expect(result._meta?.["io.toolgate/task"]).toEqual({ task_ref: "report-q3", status: "report 'q3' queued", state: "submitted" });
    expect(result.structuredContent, "a submission is not the tool's output").toBeUndefined();
    const stored = await getAssignment(assignmentOf(result));
    expect(stored.state).toBe("submitted");
    expect(textOf(result)).toBe(canonicalJson(stored.context_preview.result));
    await runner.tasks.complete("report-q3", { pages: 12 });
    const history = await until("the task's result in history", async () => {
      const h = (await gw.http("GET", `/v1/runs/${stored.run_id}/history`)).body;
      return h.task_results.find((t: { assignment_id: string }) => t.assignment_id === stored.assignment_id);
    });
    expect(history).toMatchObject({ state: "completed", context_preview: { result: { pages: 12 } } });
  });

  it("gives a ~200 KiB result as the same bytes the history holds, cut to the tool's budget", async () => {
    const { client } = await connectClient();
    const result = await call(client, "notes.dump", {}, "dump-1");
    const history = (await gw.http("GET", `/v1/runs/${await mcpRunId()}/history`)).body;
    const entry = history.tool_calls.find((t: { tool_call_id: string }) => t.tool_call_id === "dump-1");
    expect(entry.context_preview.truncated).toBe(true);
    expect(entry.context_preview.original_bytes).toBeGreaterThan(BIG_BYTES);
    const text = textOf(result);
    expect(text).toBe(canonicalJson(entry.context_preview.result));
    expect(Buffer.byteLength(text, "utf8")).toBe(entry.context_preview.retained_bytes);
    expect(Buffer.byteLength(text, "utf8")).toBeLessThanOrEqual(BUDGET);
    expect(result.structuredContent).toEqual(entry.context_preview.result);
  });

  it("passes image blocks through", async () => {
    const { client } = await connectClient();
    const result = await call(client, "notes.image", {});
    expect(result.content).toEqual([
      { type: "text", text: "a red dot" },
      { type: "image", data: "iVBORw0KGgo=", mimeType: "image/png" },
    ]);
  });

  it("reports a product-confirmed failure as a tool error with its code", async () => {
    const { client } = await connectClient();
    const result = await call(client, "notes.write", { key: "fail-1", mode: "fail" }, "fail-1");
    expect(result.isError).toBe(true);
    expect(errorOf(result)).toMatchObject({ code: "no_room", message: "the notebook is full" });
    expect((await getAssignment(JSON.parse(textOf(result)).error.details.assignment_id)).state).toBe("failed");
  });

  it("reports a product refusal as a tool error with its code, executing nothing", async () => {
    const { client } = await connectClient();
    const result = await call(client, "notes.write", { key: "refuse-1", mode: "forbidden" }, "refuse-1");
    expect(result.isError).toBe(true);
    expect(errorOf(result)).toMatchObject({ code: "authorization_refused", message: "not your notebook" });
    expect(executions.has("refuse-1")).toBe(false);
  });

  it("never reports an unknown outcome (reconciliation_required) as a success", async () => {
    const { client } = await connectClient();
    const result = await call(client, "notes.write", { key: "boom-1", mode: "explode" }, "boom-1");
    expect(result.isError).toBe(true);
    const error = errorOf(result) as { code: string; details: { state: string; assignment_id: string } };
    expect(error.details.state).toBe("reconciliation_required");
    expect((await getAssignment(error.details.assignment_id)).outcome.error.code).toBe(error.code);
    expect(result.structuredContent).toBeUndefined();
  });

  it("reports invalid arguments as a tool error the model can correct, executing nothing", async () => {
    const { client } = await connectClient();
    const result = await call(client, "notes.find", { q: 5 }, "bad-args");
    expect(result.isError).toBe(true);
    const error = JSON.parse(textOf(result)).error;
    expect(error.code).toBe("validation_failed");
    expect(error.details[0].path).toMatch(/^arguments/);
    // An unknown tool is a protocol error, as MCP asks.
    await expect(call(client, "notes.nope", {})).rejects.toSatisfy((err: unknown) => err instanceof McpError && err.code === ErrorCode.InvalidParams);
    // An ill-formed key is refused before anything is created.
    expect(errorOf(await call(client, "notes.find", { q: "x" }, "not a key!")).code).toBe("invalid_tool_call_id");
  });

  it("a stream cut mid-call is a client disconnect: re-issued with its key, the call is answered from history, executed once", async () => {
    const first = await connectClient();
    const pending = call(first.client, "notes.write", { key: "cut-1", mode: "wait" }, "cut-1");
    pending.catch(() => undefined);
    const assignmentId = await runningCall("cut-1");
    await first.client.close(); // the HTTP stream drops; nothing is cancelled
    await expect(pending).rejects.toThrow();

    const again = await connectClient();
    const reissued = call(again.client, "notes.write", { key: "cut-1", mode: "wait" }, "cut-1");
    expect((await getAssignment(assignmentId)).task_cancel).toBeNull();
    gates.get("cut-1")!();
    const result = await reissued;
    expect(result.isError).toBeFalsy();
    expect(assignmentOf(result)).toBe(assignmentId);
    expect(result.structuredContent).toEqual({ written: "cut-1" });
    // Asked a third time after completion: the same bytes, from history.
    const third = await call(again.client, "notes.write", { key: "cut-1", mode: "wait" }, "cut-1");
    expect(textOf(third)).toBe(textOf(result));
    expect(executions.get("cut-1")).toBe(1);
    expect((await gw.http("GET", `/v1/runs/${await mcpRunId()}`)).body.state).toBe("active");
  });

  it("ending the MCP session (DELETE) is a disconnect too; notifications/cancelled asks for the business-task cancel, never the run's", async () => {
    const closing = await connectClient();
    const detached = call(closing.client, "notes.write", { key: "gone-1", mode: "wait" }, "gone-1");
    detached.catch(() => undefined);
    const goneId = await runningCall("gone-1");
    await closing.transport.terminateSession();
    await closing.client.close();
    expect((await getAssignment(goneId)).task_cancel).toBeNull();
    gates.get("gone-1")!();
    await until("gone-1 to complete", async () => ((await getAssignment(goneId)).state === "completed" ? true : undefined));

    const { client } = await connectClient();
    const stop = new AbortController();
    const cancelled = call(client, "notes.write", { key: "stop-1", mode: "wait" }, "stop-1", { signal: stop.signal });
    cancelled.catch(() => undefined);
    const stopId = await runningCall("stop-1");
    stop.abort("the user pressed stop");
    await expect(cancelled).rejects.toThrow();
    const settled = await until("stop-1 to be cancelled", async () => {
      const a = await getAssignment(stopId);
      return a.state === "cancelled" ? a : undefined;
    });
    expect(settled.task_cancel.reason).toBe("the MCP client cancelled the tool call");
    expect((await gw.http("GET", `/v1/runs/${settled.run_id}`)).body.state).toBe("active");
    const answer = await call(client, "notes.write", { key: "stop-1", mode: "wait" }, "stop-1");
    expect(answer.isError).toBe(true);
    expect(errorOf(answer).code).toBe("cancelled");
    expect(executions.get("stop-1")).toBe(1);
  });

  it("forwards progress receipts as notifications/progress", async () => {
    const { client } = await connectClient();
    const seen: Array<{ progress: number; message?: string }> = [];
    const pending = call(client, "notes.write", { key: "prog-1", mode: "wait" }, "prog-1", { onprogress: (p) => void seen.push(p) });
    await until("progress to arrive", () => (seen.length > 0 ? true : undefined));
    expect(seen[0]).toMatchObject({ progress: 1, message: JSON.stringify({ step: "started" }) });
    gates.get("prog-1")!();
    expect((await pending).structuredContent).toEqual({ written: "prog-1" });
  });

  it("forwards a task's progress receipts as notifications/progress after its tools/call was answered", async () => {
    const { client } = await connectClient();
    const seen: Array<{ progress: number; message?: string }> = [];
    const assignmentReads = await DirectReads.of(nats.url, "tg_assignments");
    const { value: created, reads } = await assignmentReads.during(() =>
      client.request(
        {
          method: "tools/call",
          params: { name: "notes.write", arguments: { key: "task-prog", mode: "wait" }, task: { ttl: 60_000 }, _meta: { [TOOL_CALL_ID_META]: "task-prog" } },
        },
        CreateTaskResultSchema,
        { onprogress: (p) => void seen.push(p) },
      ),
    );
    await assignmentReads.close();
    const { task } = created;
    expect(task.status).toBe("working");
    // The task answered from the record its creation wrote, its progress followed from events subscribed to before: nothing read.
    expect(reads).toBe(0);
    await until("the task's progress to arrive", () => (seen.length > 0 ? true : undefined));
    expect(seen[0]).toMatchObject({ progress: 1, message: JSON.stringify({ step: "started" }) });
    gates.get("task-prog")!();
    await until("task-prog to complete", async () => ((await client.experimental.tasks.getTask(task.taskId)).status === "completed" ? true : undefined));
  });

  it("runs a call as an MCP task: its id is the assignment, tasks/get and tasks/result give the stored projection, tasks/cancel is the business-task cancel", async () => {
    const { client } = await connectClient();
    const asTask = (key: string) =>
      client.request(
        { method: "tools/call", params: { name: "notes.write", arguments: { key, mode: "wait" }, task: { ttl: 60_000 }, _meta: { [TOOL_CALL_ID_META]: key } } },
        CreateTaskResultSchema,
      );
    const { task } = await asTask("task-1");
    expect(task.status).toBe("working");
    expect((await getAssignment(task.taskId)).tool_call_id).toBe("task-1");
    await until("task-1 to start", () => (gates.has("task-1") ? true : undefined));
    expect((await client.experimental.tasks.getTask(task.taskId)).status).toBe("working");
    expect((await asTask("task-1")).task.taskId).toBe(task.taskId); // re-issued with its key: the same task
    gates.get("task-1")!();
    await until("task-1 to complete", async () => ((await client.experimental.tasks.getTask(task.taskId)).status === "completed" ? true : undefined));
    const result = (await client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema)) as CallToolResult;
    expect(result.structuredContent).toEqual({ written: "task-1" });
    expect(textOf(result)).toBe(canonicalJson((await getAssignment(task.taskId)).context_preview.result));
    expect(executions.get("task-1")).toBe(1);

    const { task: stopped } = await asTask("task-2");
    await until("task-2 to start", () => (gates.has("task-2") ? true : undefined));
    await client.experimental.tasks.cancelTask(stopped.taskId);
    await until("task-2 to be cancelled", async () => ((await client.experimental.tasks.getTask(stopped.taskId)).status === "cancelled" ? true : undefined));
    const settled = await getAssignment(stopped.taskId);
    expect(settled.task_cancel.reason).toBe("the MCP client cancelled the task");
    expect((await gw.http("GET", `/v1/runs/${settled.run_id}`)).body.state).toBe("active");
    expect(errorOf((await client.experimental.tasks.getTaskResult(stopped.taskId, CallToolResultSchema)) as CallToolResult).code).toBe("cancelled");
    const listed = (await client.experimental.tasks.listTasks()).tasks.map((t) => t.taskId);
    expect(listed).toEqual(expect.arrayContaining([task.taskId, stopped.taskId]));
  });

  it("answers a call on an ended MCP run with run_terminated, a tool error; the HTTP API is what ends it", async () => {
    const ended = await seedSession(gw.gateway.store, { scope: "mcp", agent: "mcp-agent", tools: [{ name: "notes.find", binding_id: "mcp-find" }] });
    const transport = new StreamableHTTPClientTransport(new URL(`${gw.baseUrl}/v1/sessions/${ended}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${ADMIN_KEY}` } },
    });
    const client = new Client({ name: "toolgate-test", version: "1.0.0" });
    await client.connect(transport);
    clients.push(client);
    const first = await call(client, "notes.find", { q: "a" });
    const run = (await getAssignment(assignmentOf(first))).run_id;
    expect((await gw.http("POST", `/v1/runs/${run}:complete`)).status).toBe(200);
    const late = await call(client, "notes.find", { q: "b" });
    expect(late.isError).toBe(true);
    expect(errorOf(late).code).toBe("run_terminated");
  });

  it("keeps at most TOOLGATE_MCP_MAX_SESSIONS open: the least recently used is closed, and its client can initialize again", async () => {
    const small = await startExecutionGateway(nats.url, {}, { TOOLGATE_MCP_MAX_SESSIONS: "1" });
    try {
      const open = async () => {
        const client = new Client({ name: "toolgate-test", version: "1.0.0" });
        await client.connect(
          new StreamableHTTPClientTransport(new URL(`${small.baseUrl}/v1/sessions/${sessionId}/mcp`), {
            requestInit: { headers: { authorization: `Bearer ${ADMIN_KEY}` } },
          }),
        );
        clients.push(client);
        return client;
      };
      const first = await open();
      expect((await first.listTools()).tools.length).toBe(5);
      const second = await open();
      await expect(first.listTools()).rejects.toThrow(/404|not open/);
      expect((await second.listTools()).tools.length).toBe(5);
      expect((await (await open()).listTools()).tools.length).toBe(5);
    } finally {
      await small.close();
    }
  });

  it("keeps the runtime API's keys and scopes: 401 without a key, 403 out of the agent's scope", async () => {
    const init = {
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
    };
    const post = (key?: string) =>
      fetch(endpoint(), {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...(key ? { authorization: `Bearer ${key}` } : {}) },
        body: JSON.stringify(init),
      });
    const anonymous = await post();
    expect(anonymous.status).toBe(401);
    expect(((await anonymous.json()) as { error: { code: string } }).error.code).toBe("unauthenticated");
    const outOfScope = await post(SCOPED_KEY);
    expect(outOfScope.status).toBe(403);
    expect(((await outOfScope.json()) as { error: { code: string } }).error.code).toBe("agent_out_of_scope");
    await expect(connectClient(SCOPED_KEY)).rejects.toThrow();
    const missing = await fetch(`${gw.baseUrl}/v1/sessions/no-such-session/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${ADMIN_KEY}` },
      body: JSON.stringify(init),
    });
    expect(missing.status).toBe(404);
    const noSession = await fetch(endpoint(), { method: "GET", headers: { accept: "text/event-stream", authorization: `Bearer ${ADMIN_KEY}` } });
    expect(noSession.status).toBe(400);
    expect(((await noSession.json()) as { error: { code: string } }).error.code).toBe("mcp_session_required");
  });

  it("answers the MCP Inspector's CLI mode, an independent client: tools/list and tools/call", async () => {
    const launcher = createRequire(import.meta.url)
      .resolve("@modelcontextprotocol/inspector/package.json")
      .replace(/package\.json$/, "clients/launcher/build/index.js");
    // A home of its own: whatever the Inspector keeps there stays out of the user's.
    const inspect = async (...args: string[]) => {
      const cli = [launcher, "--cli", endpoint().href, "--transport", "http", "--header", `Authorization: Bearer ${ADMIN_KEY}`, ...args];
      const { stdout } = await promisify(execFile)(process.execPath, cli, { env: { ...process.env, HOME: dir } });
      return JSON.parse(stdout) as Record<string, unknown>;
    };
    const listed = (await inspect("--method", "tools/list")) as { tools: Array<{ name: string }> };
    expect(listed.tools.map((t) => t.name).sort()).toEqual(["notes.dump", "notes.find", "notes.image", "notes.report", "notes.write"]);
    const called = (await inspect("--method", "tools/call", "--tool-name", "notes.find", "--tool-arg", "q=inspector")) as CallToolResult;
    expect(called.structuredContent).toEqual({ found: ["note about inspector"] });
    expect(textOf(called)).toBe(canonicalJson((await getAssignment(assignmentOf(called))).context_preview.result));
  });

  describe("the 2026-07-28 revision, through the official 2.x client", () => {
    const modernClients: ModernClient[] = [];
    afterAll(async () => {
      for (const c of modernClients) await c.close().catch(() => undefined);
    });
    const connectModern = async (): Promise<ModernClient> => {
      const client = new ModernClient({ name: "toolgate-test", version: "2.0.0" }, { versionNegotiation: { mode: "auto" } });
      await client.connect(new ModernTransport(endpoint(), { requestInit: { headers: { authorization: `Bearer ${ADMIN_KEY}` } } }));
      modernClients.push(client);
      return client;
    };

    it("negotiates 2026-07-28 (server/discover, no MCP session) and lists the same tools, without per-tool task support (the extension has none)", async () => {
      const client = await connectModern();
      expect(client.getNegotiatedProtocolVersion()).toBe("2026-07-28");
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name).sort()).toEqual(["notes.dump", "notes.find", "notes.image", "notes.report", "notes.write"]);
      const write = tools.find((t) => t.name === "notes.write")!;
      expect(write.annotations).toEqual({ readOnlyHint: false, destructiveHint: true, idempotentHint: false });
      expect(write.execution).toBeUndefined();
    });

    it("answers a call with the stored projection; re-issued with its key, it is answered from history, executed once", async () => {
      const client = await connectModern();
      const args = { name: "notes.write", arguments: { key: "modern-1", mode: "ok" }, _meta: { [TOOL_CALL_ID_META]: "modern-1" } };
      const first = (await client.callTool(args)) as CallToolResult;
      expect(first.isError).toBeFalsy();
      expect(first.structuredContent).toEqual({ written: "modern-1" });
      const stored = await getAssignment(assignmentOf(first));
      expect(textOf(first)).toBe(canonicalJson(stored.context_preview.result));
      expect(stored.tool_call_id).toBe("modern-1");
      const again = (await client.callTool(args)) as CallToolResult;
      expect(assignmentOf(again)).toBe(assignmentOf(first));
      expect(executions.get("modern-1")).toBe(1);
    });

    it("forwards progress receipts as notifications/progress on the request's stream; a failure is a tool error", async () => {
      const client = await connectModern();
      const seen: Array<{ progress: number; message?: string }> = [];
      const pending = client.callTool(
        { name: "notes.write", arguments: { key: "modern-prog", mode: "wait" }, _meta: { [TOOL_CALL_ID_META]: "modern-prog" } },
        { onprogress: (p) => void seen.push(p) },
      );
      await until("progress to arrive", () => (seen.length > 0 ? true : undefined));
      expect(seen[0]).toMatchObject({ progress: 1, message: JSON.stringify({ step: "started" }) });
      gates.get("modern-prog")!();
      expect(((await pending) as CallToolResult).structuredContent).toEqual({ written: "modern-prog" });
      const failed = (await client.callTool({ name: "notes.write", arguments: { key: "modern-fail", mode: "fail" } })) as CallToolResult;
      expect(failed.isError).toBe(true);
      expect(errorOf(failed).code).toBe("no_room");
    });

    it("a request's stream ending early is a client disconnect: the call goes on, is answered from history with its key, executed once", async () => {
      const client = await connectModern();
      const args = { name: "notes.write", arguments: { key: "modern-cut", mode: "wait" }, _meta: { [TOOL_CALL_ID_META]: "modern-cut" } };
      const cut = new AbortController();
      const pending = client.callTool(args, { signal: cut.signal });
      const assignment = await runningCall("modern-cut");
      cut.abort();
      await expect(pending).rejects.toThrow();
      gates.get("modern-cut")!();
      await until("modern-cut to complete", async () => ((await getAssignment(assignment)).state === "completed" ? true : undefined));
      expect((await getAssignment(assignment)).task_cancel).toBeNull();
      const again = (await client.callTool(args)) as CallToolResult;
      expect(assignmentOf(again)).toBe(assignment);
      expect(again.structuredContent).toEqual({ written: "modern-cut" });
      expect(executions.get("modern-cut")).toBe(1);
    });

    describe("tasks (the io.modelcontextprotocol/tasks extension), through the official ext-tasks client", () => {
      const transports: ModernTransport[] = [];
      afterAll(async () => {
        for (const t of transports) await t.close().catch(() => undefined);
      });
      /**
       * ext-tasks leaves the raw request path to the host (the 2.x client's decoder refuses
       * `resultType: "task"`): the host's coordinator here is the SDK's own transport, answers matched by id.
       */
      const rawDispatch = async (url = endpoint()): Promise<RawClientDispatch> => {
        const transport = new ModernTransport(url, { requestInit: { headers: { authorization: `Bearer ${ADMIN_KEY}` } } });
        transports.push(transport);
        const waiting = new Map<string, (response: JsonRpcResponse) => void>();
        transport.onmessage = (message) => {
          const answer = message as { id?: string; result?: unknown; error?: { code: number; message: string } };
          const settle = answer.id === undefined ? undefined : waiting.get(answer.id);
          if (!settle) return;
          waiting.delete(answer.id!);
          settle(answer.error ? { kind: "error", error: answer.error } : { kind: "result", result: answer.result as never });
        };
        await transport.start();
        let next = 0;
        return (request) =>
          new Promise((resolve, reject) => {
            const id = `raw-${++next}`;
            waiting.set(id, resolve);
            transport.send({ ...(request as object), jsonrpc: "2.0", id } as JSONRPCMessage).catch(reject);
          });
      };
      const taskSession = async (url = endpoint()): Promise<TaskEnabledSession> => {
        const client = new ModernClient({ name: "toolgate-test", version: "2.0.0" }, { versionNegotiation: { mode: "auto" } });
        await client.connect(new ModernTransport(url, { requestInit: { headers: { authorization: `Bearer ${ADMIN_KEY}` } } }));
        modernClients.push(client);
        return createTaskSessionFromClient(client, {
          endpointId: `toolgate-${url.pathname}`,
          rawDispatch: await rawDispatch(url),
          v2RequestFraming: { protocolVersion: "2026-07-28", clientInfo: { name: "toolgate-test", version: "2.0.0" }, clientCapabilities: {} },
        });
      };

      it("declares the extension in server/discover", async () => {
        const client = await connectModern();
        expect(client.getServerCapabilities()?.extensions).toEqual({ "io.modelcontextprotocol/tasks": {} });
        expect((await taskSession()).capabilities).toBeDefined();
      });

      it("answers a call as a task whose id is the assignment; tasks/get reports working, then the stored projection; re-issued with its key, the same task, executed once", async () => {
        const session = await taskSession();
        const execution = await session.callTool("notes.write", { key: "ext-1", mode: "wait" }, { metadata: { [TOOL_CALL_ID_META]: "ext-1" } });
        expect(execution.kind).toBe("task");
        const taskId = execution.handle!.taskId;
        const stored = await getAssignment(taskId);
        expect(stored.tool_call_id).toBe("ext-1");
        await until("ext-1 to start", () => (gates.has("ext-1") ? true : undefined));
        const working = await until("ext-1's progress in its status", async () => {
          const view = await session.task(taskId).snapshot();
          return view.statusMessage ? view : undefined;
        });
        expect(working).toMatchObject({ status: "working", statusMessage: JSON.stringify({ step: "started" }), retentionMs: null });
        // Re-issued by another client (the first one's stream dropped, say): the same task.
        const again = await (await taskSession()).callTool("notes.write", { key: "ext-1", mode: "wait" }, { metadata: { [TOOL_CALL_ID_META]: "ext-1" } });
        expect(again.handle!.taskId).toBe(taskId);
        await again.detach();
        gates.get("ext-1")!();
        const { outcome } = await execution.settle();
        expect(outcome.status).toBe("completed");
        const result = (outcome as { result: CallToolResult }).result;
        expect(result.structuredContent).toEqual({ written: "ext-1" });
        expect(textOf(result)).toBe(canonicalJson((await getAssignment(taskId)).context_preview.result));
        expect(executions.get("ext-1")).toBe(1);
      });

      it("gives a ~200 KiB result, cut to the tool's budget, as the same bytes the history holds", async () => {
        const session = await taskSession();
        const execution = await session.callTool("notes.dump", {}, { metadata: { [TOOL_CALL_ID_META]: "ext-dump" } });
        const { outcome } = await execution.settle();
        const result = (outcome as { result: CallToolResult }).result;
        const history = (await gw.http("GET", `/v1/runs/${await mcpRunId()}/history`)).body;
        const entry = history.tool_calls.find((t: { tool_call_id: string }) => t.tool_call_id === "ext-dump");
        expect(entry.assignment_id).toBe(execution.handle!.taskId);
        expect(entry.context_preview.truncated).toBe(true);
        expect(textOf(result)).toBe(canonicalJson(entry.context_preview.result));
        expect(Buffer.byteLength(textOf(result), "utf8")).toBeLessThanOrEqual(BUDGET);
        expect(result._meta?.["io.toolgate/truncated"]).toBe(true);
      });

      it("reports a product failure as a completed task whose result is the tool error, as tools/call answers it", async () => {
        const session = await taskSession();
        const execution = await session.callTool("notes.write", { key: "ext-fail", mode: "fail" });
        expect(execution.kind).toBe("task");
        const { outcome } = await execution.settle();
        expect(outcome.status).toBe("completed");
        const result = (outcome as { result: CallToolResult }).result;
        expect(result.isError).toBe(true);
        expect(errorOf(result).code).toBe("no_room");
      });

      it("tasks/cancel is the business-task cancel: the task ends cancelled, the run goes on", async () => {
        const session = await taskSession();
        const execution = await session.callTool("notes.write", { key: "ext-stop", mode: "wait" }, { metadata: { [TOOL_CALL_ID_META]: "ext-stop" } });
        const taskId = execution.handle!.taskId;
        await until("ext-stop to start", () => (gates.has("ext-stop") ? true : undefined));
        await execution.cancel();
        await until("ext-stop to be cancelled", async () => ((await session.task(taskId).snapshot()).status === "cancelled" ? true : undefined));
        const settled = await getAssignment(taskId);
        expect(settled.state).toBe("cancelled");
        expect(settled.task_cancel.reason).toBe("the MCP client cancelled the task");
        expect((await gw.http("GET", `/v1/runs/${settled.run_id}`)).body.state).toBe("active");
      });

      it("a task of another session is unknown; tasks/get without the extension declared is refused", async () => {
        const other = await seedSession(gw.gateway.store, { scope: "mcp", agent: "mcp-agent", tools: [{ name: "notes.find", binding_id: "mcp-find" }] });
        const session = await taskSession();
        const mine = await session.callTool("notes.find", { q: "mine" });
        const taskId = mine.handle!.taskId;
        await mine.settle();
        const foreign = await taskSession(new URL(`${gw.baseUrl}/v1/sessions/${other}/mcp`));
        await expect(foreign.task(taskId).snapshot()).rejects.toThrow(/not a tool call of this session/);
        const plain = await connectModern();
        await expect(
          plain.request({ method: "tasks/get", params: { taskId } }, { "~standard": { version: 1, vendor: "test", validate: (value) => ({ value }) } }),
        ).rejects.toMatchObject({
          code: -32021,
          data: { requiredCapabilities: { extensions: { "io.modelcontextprotocol/tasks": {} } } },
        });
      });
    });

    it("keeps the runtime API's keys and scopes on 2026-07-28 requests", async () => {
      const client = new ModernClient({ name: "toolgate-test", version: "2.0.0" }, { versionNegotiation: { mode: { pin: "2026-07-28" } } });
      await expect(client.connect(new ModernTransport(endpoint(), { requestInit: { headers: { authorization: `Bearer ${SCOPED_KEY}` } } }))).rejects.toThrow(
        /403|[Ff]orbidden/,
      );
    });
  });
});
