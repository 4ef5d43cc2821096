import {
  CancelTaskRequestV2Schema,
  CLIENT_CAPABILITIES_META_KEY_V2,
  GetTaskRequestV2Schema,
  hasTaskClientCapabilityV2,
  TASKS_EXTENSION_ID_V2,
  UpdateTaskRequestV2Schema,
  type CreateTaskResultV2,
  type DetailedTaskV2,
} from "@modelcontextprotocol/ext-tasks/core/v2";
import { MissingRequiredClientCapabilityError, type Server, type ServerContext } from "@modelcontextprotocol/server";
import type { AssignmentView } from "../execution/runs/views.js";
import { callResult } from "./call-result.js";
import { faultsAsProtocolErrors } from "./sdk-errors.js";
import { POLL_INTERVAL_MS, type SessionTasks } from "./session-tasks.js";

/** Whether the request declares the tasks extension in its per-request capabilities: only then may it be answered with a task. */
export function declaresTasks(ctx: ServerContext): boolean {
  const envelope = ctx.mcpReq.envelope as Record<string, unknown> | undefined;
  return hasTaskClientCapabilityV2({ _meta: { [CLIENT_CAPABILITIES_META_KEY_V2]: envelope?.[CLIENT_CAPABILITIES_META_KEY_V2] } });
}

/**
 * A tool call as the extension's task (`tasks/get`, and the seed `tools/call` answers with). The
 * extension's `failed` is for JSON-RPC errors only and a tool call never ends in one: every settled
 * call is `completed` with exactly the answer `tools/call` gives (the stored projection, or an
 * `isError` result, so an unknown outcome is never a success), except one that was cancelled. While
 * it works, `statusMessage` carries its latest progress receipt: the extension has no progress
 * notifications for tasks.
 */
export function detailedTask(view: AssignmentView): DetailedTaskV2 {
  const task = {
    taskId: view.assignment_id,
    createdAt: new Date(view.created_at).toISOString(),
    lastUpdatedAt: new Date(view.updated_at).toISOString(),
    ttlMs: null, // the history keeps every result as long as the run
    pollIntervalMs: POLL_INTERVAL_MS,
  };
  switch (view.state) {
    case "pending":
    case "claimed":
    case "running": {
      const latest = view.progress.at(-1);
      const statusMessage = view.task_cancel ? "business-task cancel requested" : latest && JSON.stringify(latest.progress);
      return { ...task, status: "working", ...(statusMessage ? { statusMessage } : {}) };
    }
    case "cancelled":
      return { ...task, status: "cancelled", ...(view.outcome?.kind === "cancelled" ? { statusMessage: view.outcome.reason } : {}) };
    default:
      // The result as `tools/call` puts it on the wire, its `resultType` included.
      return {
        ...task,
        status: "completed",
        result: { ...callResult(view), resultType: "complete" } as Extract<DetailedTaskV2, { status: "completed" }>["result"],
      };
  }
}

/** The `tools/call` answer that hands a call over as a task: its seed state, without the result (`tasks/get` has it). */
export function createdTask(view: AssignmentView): CreateTaskResultV2 {
  const { taskId, status, statusMessage, createdAt, lastUpdatedAt, ttlMs, pollIntervalMs } = detailedTask(view);
  return { taskId, status, ...(statusMessage ? { statusMessage } : {}), createdAt, lastUpdatedAt, ttlMs, pollIntervalMs, resultType: "task" };
}

/** Answers only a request that declares the extension, as it asks of `tasks/*`. */
function declaring<T>(ctx: ServerContext, work: () => Promise<T>): Promise<T> {
  if (!declaresTasks(ctx)) throw new MissingRequiredClientCapabilityError({ requiredCapabilities: { extensions: { [TASKS_EXTENSION_ID_V2]: {} } } });
  return faultsAsProtocolErrors(work);
}

/**
 * Serves the `io.modelcontextprotocol/tasks` extension (2026-07-28) on a 2.x server, with the SDK's
 * own extension seams: the capability under `extensions`, and `tasks/get`, `tasks/update` and
 * `tasks/cancel` as request handlers validated by the extension's published schemas. `tasks/cancel`
 * is the business-task cancel, never the run's; toolgate's tasks never ask for input, so
 * `tasks/update` has nothing outstanding to answer and is acknowledged for a known task (the
 * extension asks that responses to no outstanding request be ignored).
 */
export function serveTasksExtension(server: Server, tasks: SessionTasks): void {
  server.registerCapabilities({ extensions: { [TASKS_EXTENSION_ID_V2]: {} } });
  server.setRequestHandler("tasks/get", { params: GetTaskRequestV2Schema.shape.params }, (params, ctx) =>
    declaring(ctx, async () => detailedTask(await tasks.get(params.taskId))),
  );
  server.setRequestHandler("tasks/update", { params: UpdateTaskRequestV2Schema.shape.params }, (params, ctx) =>
    declaring(ctx, async () => (await tasks.get(params.taskId), {})),
  );
  server.setRequestHandler("tasks/cancel", { params: CancelTaskRequestV2Schema.shape.params }, (params, ctx) =>
    declaring(ctx, async () => (await tasks.cancel(params.taskId, "the MCP client cancelled the task"), {})),
  );
}
