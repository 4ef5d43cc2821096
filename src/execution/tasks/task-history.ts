import { buildContextPreview, type ContextPreview } from "../../budget/index.js";
import type { AssignmentRecord, SubmittedTask, TaskResult } from "../model/records.js";
import type { ProjectionStore } from "../receipts/projection-store.js";
import type { TaskResultEntry } from "../runs/views.js";
import type { TaskSubmission } from "../../wire/messages.js";

/** What the model reads as the answer of a tool call that submitted a task: its reference and status. */
export function submissionResult(task: SubmittedTask): TaskSubmission {
  return { task_ref: task.task_ref, status: task.status };
}

/**
 * The submission as it enters history: whole, never cut (protocol-protected, docs/protocol.md
 * section 5; its size is bounded by the wire schema instead), and the same on every read, since the
 * task it is made of is set once.
 */
export function submissionPreview(a: AssignmentRecord & { task: SubmittedTask }): ContextPreview {
  return buildContextPreview(submissionResult(a.task), { maxResultContextBytes: a.max_result_context_bytes, kind: "submission" });
}

/** The history entry of one task result; the completed result's projection is the one stored for its assignment. */
export async function taskResultEntry(a: AssignmentRecord, result: TaskResult, projections: ProjectionStore): Promise<TaskResultEntry> {
  const completed = result.outcome.kind === "completed";
  return {
    assignment_id: a.assignment_id,
    tool_call_id: a.tool_call_id,
    tool_name: a.tool_name,
    task_ref: a.task!.task_ref,
    receipt_id: result.receipt_id,
    state: result.outcome.kind,
    context_preview: completed ? (await projections.ensure(a)).context_preview : null,
    outcome: result.outcome.kind === "completed" ? null : result.outcome,
    after_tool_calls: result.after_tool_calls,
    at: result.at,
  };
}
