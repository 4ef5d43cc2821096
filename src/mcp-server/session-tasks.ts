import type { Execution } from "../execution/execution.js";
import type { AssignmentView } from "../execution/runs/views.js";
import { ToolgateError } from "../errors/toolgate-error.js";
import { INVALID_PARAMS, McpFault } from "./session-tools.js";

/** How often a client is told to poll a working task. */
export const POLL_INTERVAL_MS = 500;

/**
 * The MCP tasks of a toolgate session, whatever the revision: a task is a tool call of the session's
 * MCP run, its id the assignment id (stored before `tools/call` answers with it, so it survives any
 * disconnect and a restart). Each revision's server shapes these into its own messages.
 */
export class SessionTasks {
  constructor(
    private readonly execution: Execution,
    private readonly runId: string,
  ) {}

  /** The task's assignment when it belongs to this session's MCP run; null otherwise (another session's task is unknown here). */
  async find(taskId: string): Promise<AssignmentView | null> {
    const view = await this.execution.history.assignment(taskId).catch((err: unknown) => {
      if (err instanceof ToolgateError && err.code === "assignment_not_found") return null;
      throw err;
    });
    return view?.run_id === this.runId ? view : null;
  }

  /** `find`, or the invalid-params fault MCP asks for an unknown task. */
  async get(taskId: string): Promise<AssignmentView> {
    const view = await this.find(taskId);
    if (!view) throw new McpFault(INVALID_PARAMS, `task '${taskId}' is not a tool call of this session`);
    return view;
  }

  /** The business-task cancel of the task (never the run's); work not running yet cannot be cancelled. */
  async cancel(taskId: string, reason: string): Promise<void> {
    await this.get(taskId);
    try {
      await this.execution.taskCancel.request(taskId, reason);
    } catch (err) {
      if (err instanceof ToolgateError && err.callerFault) throw new McpFault(INVALID_PARAMS, err.message);
      throw err;
    }
  }
}
