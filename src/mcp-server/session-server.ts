import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult, type CreateTaskResult } from "@modelcontextprotocol/sdk/types.js";
import { sessionMcpRunId } from "../execution/model/ids.js";
import { faultsAsMcpErrors } from "./sdk-errors.js";
import { settledView, type Opened } from "./settled-view.js";
import { answerSources, answerToolCall, createToolCall, progressForwarder, sessionTools, type SessionToolsDeps, type ToolCallRef } from "./session-tools.js";
import { RunTaskStore, taskOf } from "./task-store.js";

/**
 * The MCP server of one 2025-11-25 connection (SDK 1.x, sessions and tasks in core), bound to one
 * toolgate session. `tools/list` is the toolset version the session's agent version pins;
 * `tools/call` is a tool call on the session's MCP run (one per session, made on first use)
 * answered with its stored projection once settled. A `tools/call` with `task` is an MCP task (see
 * `RunTaskStore`) whose progress receipts go on as `notifications/progress` on the session's stream
 * until it is settled. `closed` aborts when the connection closes: a client disconnect (the call
 * goes on), unlike a client's `notifications/cancelled` (the business-task cancel).
 */
export function sessionServer(deps: SessionToolsDeps, sessionId: string, closed: AbortSignal): Server {
  const { store, execution } = deps;
  const runId = sessionMcpRunId(sessionId);
  const server = new Server(
    { name: "toolgate", version: deps.version },
    {
      capabilities: { tools: { listChanged: false }, tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } },
      taskStore: new RunTaskStore(execution, runId),
    },
  );

  server.setRequestHandler(ListToolsRequestSchema, () => faultsAsMcpErrors(async () => ({ tools: await sessionTools(store, sessionId) })));

  server.setRequestHandler(CallToolRequestSchema, (request, extra) =>
    faultsAsMcpErrors(async (): Promise<CallToolResult | CreateTaskResult> => {
      const asTask = Boolean(request.params.task);
      const progressToken = request.params._meta?.progressToken;
      // Waited for: its answer, or a task's progress to forward.
      const created = await createToolCall(execution, sessionId, runId, request.params, { waited: !asTask || progressToken !== undefined });
      if ("answer" in created) return created.answer;
      if (asTask) {
        // The task is the assignment, stored before this answer; its progress outlives the request.
        const view = await execution.history.createdView(created.assignment).catch((err: unknown) => {
          created.opened?.events.unsubscribe();
          throw err;
        });
        if (progressToken !== undefined) void forwardTaskProgress(created, progressToken);
        return { task: taskOf(view) };
      }
      return answerToolCall(deps, created, extra.signal, () => closed.aborted, progressForwarder(progressToken, extra.sendNotification));
    }),
  );

  /** A task's progress after its `tools/call` was answered: on the session's standalone stream, with the call's token. */
  async function forwardTaskProgress({ call, opened }: { call: ToolCallRef; opened?: Opened }, progressToken: string | number): Promise<void> {
    const send = progressForwarder(progressToken, (notification) => server.notification(notification));
    await settledView(answerSources(deps), call, closed, send, { opened }).catch((err: unknown) =>
      deps.log.info({ assignment_id: call.assignment_id, err }, "MCP task progress: stopped following"),
    );
  }
  return server;
}
