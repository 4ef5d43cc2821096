import { z } from "zod";
import { contextPreviewSchema } from "../../budget/index.js";
import { HttpTimestamp } from "../../http/timestamp.js";
import { Id, Sha256Hex, ToolKind } from "../../wire/primitives.js";
import { ASSIGNMENT_STATES } from "../model/assignment-states.js";
import { ErrorOrReason, OUTCOME_KINDS, ProgressEntry, SubmittedTask, TaskCancelRequest, OperatorSettled } from "../model/records.js";
import { RUN_STATES } from "../model/run-states.js";

/**
 * What a reader of a run is shown: its history, one assignment in detail, its background tasks. One
 * schema each: the history reader builds its input form (times as epoch milliseconds, as the records
 * hold them), the HTTP routes validate and document its output form (times as RFC 3339).
 */

const TaskView = SubmittedTask.extend({ submitted_at: HttpTimestamp, deadline_at: HttpTimestamp });
const TaskCancelView = TaskCancelRequest.extend({ requested_at: HttpTimestamp });
const ProgressView = ProgressEntry.pick({ seq: true, progress: true }).extend({ at: HttpTimestamp });

const historyEntryShape = {
  assignment_id: Id,
  tool_call_id: Id.nullable(),
  tool_name: z.string(),
  arguments: z.unknown(),
  state: z.enum(ASSIGNMENT_STATES),
  context_preview: contextPreviewSchema
    .nullable()
    .describe("The stored projection of the first completed receipt, computed once; for a call that submitted a background task, its submission (never cut). Never the full receipt"),
  outcome: ErrorOrReason.nullable().describe("Error or reason of a failed, cancelled or reconciliation_required call (not budgeted: protocol-protected)"),
  compensated_by: Id.nullable().describe("The compensation undoing this completed write; this entry's projection stays as it was"),
  task: TaskView.nullable().describe("The background task this call submitted; context_preview is then the submission, and the task's result is an entry of task_results"),
  created_at: HttpTimestamp,
};

/** One tool call as the model sees it: its call, its state, and for a completed one the stored projection. */
export const HistoryEntrySchema = z.object(historyEntryShape).meta({ id: "HistoryEntry" });
export type HistoryEntry = z.input<typeof HistoryEntrySchema>;

/** An assignment for operators and runtimes: state, claim holder, receipts, progress; never the claim token's digest. */
export const AssignmentSchema = z
  .object({
    ...historyEntryShape,
    run_id: Id,
    binding_id: Id,
    tool_kind: ToolKind,
    argument_digest: Sha256Hex,
    operation_key: z.string(),
    generation: z.number().int(),
    executor_id: Id.nullable(),
    lease_expires_at: HttpTimestamp.nullable(),
    accepted_receipt_id: Id.nullable(),
    final_receipt_id: Id.nullable(),
    progress: z.array(ProgressView),
    compensates: Id.nullable().describe("On a compensation: the completed write it undoes"),
    task_cancel: TaskCancelView.nullable().describe("A business-task cancel was requested; the executor's receipt decides the outcome"),
    settled_by: OperatorSettled.extend({ at: HttpTimestamp }).nullable().describe("The operator who settled it from reconciliation_required"),
    updated_at: HttpTimestamp,
  })
  .meta({ id: "Assignment" });
export type AssignmentView = z.input<typeof AssignmentSchema>;

/** A background task's outcome as its own history entry, after `after_tool_calls` tool calls of the run. */
export const TaskResultEntrySchema = z
  .object({
    assignment_id: Id,
    tool_call_id: Id.nullable(),
    tool_name: z.string(),
    task_ref: z.string(),
    receipt_id: Id.nullable().describe("The final receipt that settled the task; null when its deadline passed"),
    state: z.enum(OUTCOME_KINDS),
    context_preview: contextPreviewSchema.nullable().describe("For completed: the stored projection of its result, computed once with the tool's budget"),
    outcome: ErrorOrReason.nullable().describe("For the others: the error or reason (protocol-protected, never cut)"),
    after_tool_calls: z.number().int().nonnegative().describe("The entry follows this many tool calls of the run in the model's history"),
    at: HttpTimestamp,
  })
  .meta({ id: "TaskResultEntry" });
export type TaskResultEntry = z.input<typeof TaskResultEntrySchema>;

/** One background task of a run. */
export const RunTaskSchema = z.object({
  assignment_id: Id,
  tool_call_id: Id.nullable(),
  tool_name: z.string(),
  state: z.enum(ASSIGNMENT_STATES).describe("submitted while the task runs; then how it was settled"),
  task: TaskView,
  task_cancel: TaskCancelView.nullable(),
  progress: z.array(ProgressView),
  results: z.number().int().nonnegative().describe("How many of the run's task_results are this task's settlements"),
});
export type RunTask = z.input<typeof RunTaskSchema>;

/** `GET /v1/runs/{id}/history`: what the model sees of the run. */
export const RunHistorySchema = z.object({
  run_id: Id,
  state: z.enum(RUN_STATES),
  tool_calls: z.array(HistoryEntrySchema),
  task_results: z.array(TaskResultEntrySchema).describe("Outcomes of background tasks, each its own entry, in arrival order (docs/async-tasks.md)"),
});

/** `GET /v1/runs/{id}/tasks`. */
export const RunTasksSchema = z.object({
  run_id: Id,
  tasks: z.array(RunTaskSchema).describe("Every background task the run's tool calls submitted, in call order"),
});
