import { ToolgateError } from "../../errors/toolgate-error.js";
import { nextAssignmentState } from "../model/assignment-states.js";
import type { ControlChannel } from "../transport/control-channel.js";
import type { AssignmentRecord } from "../model/records.js";
import type { VersionedStore } from "../../kv/versioned-store.js";

/**
 * Business-task cancel (docs/protocol.md section 4): a request to the executor to stop a long-running
 * task. It is recorded on the assignment once (compare-and-set, visible and idempotent) and sent to
 * the executor holding it; the state moves only with the executor's answer: `cancelled` when it
 * confirms (`BusinessCancelled`), `completed` when the task finished first. The run goes on.
 */
export class TaskCancelService {
  constructor(
    private readonly assignments: VersionedStore<AssignmentRecord>,
    private readonly control: ControlChannel,
    private readonly now: () => number = Date.now,
  ) {}

  async request(assignmentId: string, reason = "business task cancel requested"): Promise<AssignmentRecord> {
    const res = await this.assignments.mutate(assignmentId, (cur) => {
      // Asked before: the same answer again, whatever the task did since.
      if (cur.task_cancel) return { result: true };
      if (!nextAssignmentState(cur.state, "request_task_cancel")) return { result: false };
      const now = this.now();
      return { write: { ...cur, task_cancel: { requested_at: now, reason }, updated_at: now }, result: true };
    });
    if (!res) throw new ToolgateError("assignment_not_found", `assignment '${assignmentId}' does not exist`);
    const a = res.value;
    if (!res.result)
      throw new ToolgateError(
        "task_not_running",
        `assignment '${assignmentId}' is ${a.state}: only confirmed work, running or submitted, has a business task to cancel (cancel the run to withdraw pending work)`,
      );
    // Sent again on a repeat while it runs: a repeat is how a caller recovers a message it fears lost.
    if ((a.state === "running" || a.state === "submitted") && a.claim)
      await this.control.tell(a.scope, a.claim.executor_id, { type: "task_cancel_requested", assignment_id: a.assignment_id, reason: a.task_cancel!.reason });
    return a;
  }
}
