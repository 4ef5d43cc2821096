import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError, type CallToolResult, type CreateTaskResult } from "@modelcontextprotocol/sdk/types.js";
import type { ConfigStore } from "../config/config-store.js";
import type { Execution } from "../execution/execution.js";
import { sessionMcpRunId } from "../execution/model/ids.js";
import { ApiError } from "../http/errors.js";
import type { Logger } from "../log/logger.js";
import { Id } from "../wire/messages.js";
import { callResult, toolError } from "./call-result.js";
import { settledView } from "./settled-view.js";
import { RunTaskStore, taskOf } from "./task-store.js";
import { mcpTool } from "./tool-listing.js";

/** The `_meta` key of a `tools/call` that names the tool call: it becomes its `tool_call_id` (the idempotency key). */
export const TOOL_CALL_ID_META = "io.toolgate/tool_call_id";

export interface SessionServerDeps {
  store: ConfigStore;
  execution: Execution;
  log: Logger;
  version: string;
}

/**
 * The MCP server of one connection, bound to one toolgate session. `tools/list` is the toolset
 * version the session's agent version pins; `tools/call` is a tool call on the session's MCP run
 * (one per session, made on first use) answered with its stored projection once settled.
 * A `tools/call` with `task` is an MCP task (see `RunTaskStore`). `isClosed` tells a closing
 * connection (a client disconnect: the call goes on) from a client's `notifications/cancelled` (the
 * business-task cancel); both abort the handler's signal.
 */
export function sessionServer(deps: SessionServerDeps, sessionId: string, isClosed: () => boolean): Server {
  const { store, execution, log } = deps;
  const runId = sessionMcpRunId(sessionId);
  const server = new Server(
    { name: "toolgate", version: deps.version },
    {
      capabilities: { tools: { listChanged: false }, tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } },
      taskStore: new RunTaskStore(execution, runId),
    },
  );

  server.setRequestHandler(ListToolsRequestSchema, async () => {
    const session = await store.getSession(sessionId);
    if (!session) throw new McpError(ErrorCode.InvalidRequest, `session '${sessionId}' no longer exists`);
    const pinned = await store.getAgentVersion(session.agent_version);
    const toolset = pinned && (await store.getToolsetVersion(pinned.toolset, pinned.toolset_version));
    if (!toolset) throw new McpError(ErrorCode.InternalError, `the toolset version pinned by agent version '${session.agent_version}' is missing`);
    const tools = await Promise.all(
      toolset.tools.map(async (tool) => {
        const binding = await store.getBinding(tool.binding_id);
        if (!binding) throw new McpError(ErrorCode.InternalError, `binding '${tool.binding_id}' of tool '${tool.name}' is missing`);
        return mcpTool(tool, binding);
      }),
    );
    return { tools };
  });

  server.setRequestHandler(CallToolRequestSchema, async (request, extra): Promise<CallToolResult | CreateTaskResult> => {
    const { name, arguments: args = {}, _meta } = request.params;
    const key = _meta?.[TOOL_CALL_ID_META];
    if (key !== undefined && !Id.safeParse(key).success)
      return toolError("invalid_tool_call_id", `_meta["${TOOL_CALL_ID_META}"] must be 1-128 characters of A-Z a-z 0-9 _ -`);
    let assignmentId: string;
    try {
      const run = await execution.runs.open(sessionId, runId);
      const created = await execution.toolCalls.create(run.run_id, { tool_name: name, arguments: args, ...(typeof key === "string" ? { tool_call_id: key } : {}) });
      assignmentId = created.assignment.assignment_id;
    } catch (err) {
      // An unknown tool is a protocol error (MCP asks so); anything the model can correct is a tool error.
      if (err instanceof ApiError && err.code === "tool_not_found") throw new McpError(ErrorCode.InvalidParams, err.message);
      if (err instanceof ApiError && err.status < 500) return toolError(err.code, err.message, err.details);
      throw err;
    }

    // A task-augmented call answers at once with its task: the assignment, stored before this answer.
    if (request.params.task) return { task: taskOf(await execution.history.assignment(assignmentId)) };

    extra.signal.addEventListener(
      "abort",
      // The connection closing aborts too, synchronously before it reports itself closed: look after it did.
      () => setImmediate(() => void (isClosed() ? undefined : cancelTask(execution, log, assignmentId))),
      { once: true },
    );
    const progressToken = _meta?.progressToken;
    const view = await settledView(execution.history, assignmentId, extra.signal, (entry) => {
      if (progressToken !== undefined)
        void extra.sendNotification({ method: "notifications/progress", params: { progressToken, progress: entry.seq, message: JSON.stringify(entry.progress) } }).catch(() => undefined);
    });
    return view ? callResult(view) : toolError("cancel_requested", `the business-task cancel of assignment '${assignmentId}' was asked for`);
  });
  return server;
}

/** `notifications/cancelled`: the business-task cancel of the call (the run goes on); work not yet running is left to finish. */
async function cancelTask(execution: Execution, log: Logger, assignmentId: string): Promise<void> {
  try {
    await execution.taskCancel.request(assignmentId, "the MCP client cancelled the tool call");
  } catch (err) {
    log.info({ assignment_id: assignmentId, err }, "MCP cancel: no business task to cancel");
  }
}
