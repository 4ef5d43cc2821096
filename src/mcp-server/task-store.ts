import type { TaskStore } from "@modelcontextprotocol/sdk/experimental/tasks/interfaces.js";
import { ErrorCode, McpError, type Result, type Task } from "@modelcontextprotocol/sdk/types.js";
import type { Execution } from "../execution/execution.js";
import type { AssignmentView } from "../execution/runs/views.js";
import { callResult } from "./call-result.js";
import { POLL_INTERVAL_MS, SessionTasks } from "./session-tasks.js";
import { faultsAsMcpErrors } from "./sdk-errors.js";

/** Tasks listed per page. */
const PAGE = 100;

/** An assignment's MCP task status: working until settled; an unknown outcome is never `completed`. */
function taskStatus(state: AssignmentView["state"]): Task["status"] {
  switch (state) {
    case "pending":
    case "claimed":
    case "running":
    case "submitted":
      return "working";
    case "completed":
      return "completed";
    case "cancelled":
      return "cancelled";
    default:
      return "failed";
  }
}

export function taskOf(view: AssignmentView): Task {
  return {
    taskId: view.assignment_id,
    status: taskStatus(view.state),
    ttl: null, // the history keeps every result as long as the run
    createdAt: new Date(view.created_at).toISOString(),
    lastUpdatedAt: new Date(view.updated_at).toISOString(),
    pollInterval: POLL_INTERVAL_MS,
    ...(view.task_cancel && (view.state === "running" || view.state === "submitted")
      ? { statusMessage: "business-task cancel requested" }
      : view.task && view.state === "submitted"
        ? { statusMessage: view.task.status }
        : {}),
  };
}

/**
 * MCP tasks (2025-11-25) over the session's MCP run (see `SessionTasks`): `tasks/get` reads the
 * assignment, `tasks/result` is the stored projection (the `tools/call` answer), `tasks/cancel` asks
 * for the business-task cancel. Nothing is kept here: the SDK's own task writes
 * (`storeTaskResult`) have nothing to add.
 */
export class RunTaskStore implements TaskStore {
  private readonly tasks: SessionTasks;

  constructor(
    private readonly execution: Execution,
    private readonly runId: string,
  ) {
    this.tasks = new SessionTasks(execution, runId);
  }

  createTask(): Promise<Task> {
    return Promise.reject(new Error("toolgate's tasks are its tool calls: they are created by tools/call"));
  }

  async getTask(taskId: string): Promise<Task | null> {
    const view = await this.tasks.find(taskId);
    return view && taskOf(view);
  }

  async storeTaskResult(): Promise<void> {}

  async getTaskResult(taskId: string): Promise<Result> {
    return callResult(await faultsAsMcpErrors(() => this.tasks.get(taskId)));
  }

  async updateTaskStatus(taskId: string, status: Task["status"]): Promise<void> {
    if (status !== "cancelled") throw new Error(`toolgate's tasks change status only by their executor (asked: ${status})`);
    await faultsAsMcpErrors(() => this.tasks.cancel(taskId, "the MCP client cancelled the task"));
  }

  async listTasks(cursor?: string): Promise<{ tasks: Task[]; nextCursor?: string }> {
    const run = await this.execution.runs.get(this.runId).catch(() => null);
    const ids = run?.assignment_ids ?? [];
    const start = cursor === undefined ? 0 : Number.parseInt(cursor, 10);
    if (!Number.isInteger(start) || start < 0) throw new McpError(ErrorCode.InvalidParams, `cursor '${cursor}' is not one tasks/list gave`);
    const page = ids.slice(start, start + PAGE);
    const tasks = await Promise.all(page.map(async (id) => taskOf(await this.execution.history.assignment(id))));
    return { tasks, ...(start + PAGE < ids.length ? { nextCursor: String(start + PAGE) } : {}) };
  }
}
