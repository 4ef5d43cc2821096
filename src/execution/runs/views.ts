import { z } from "zod";
import { contextPreviewSchema } from "../../budget/index.js";
import { Id, type Millis, Sha256Hex, ToolKind } from "../../wire/primitives.js";
import { ASSIGNMENT_STATES } from "../model/assignment-states.js";
import { ErrorOrReason, OUTCOME_KINDS, OperatorSettled, ProgressEntry, SubmittedTask, TaskCancelRequest } from "../model/records.js";

/**
 * What a reader of a run is shown: a history entry, one assignment in detail, a background task's
 * result entry, a run's task. Declared once for both forms, by the schema of a time: the history
 * reader builds them with times as epoch milliseconds (as the records hold them, `ReaderViews`),
 * the HTTP routes answer with them as RFC 3339 strings (`src/execution/http/`).
 */
export function viewSchemas<Time extends z.ZodType<unknown, number>>(time: Time) {
  const task = SubmittedTask.extend({ submitted_at: time, deadline_at: time });
  const taskCancel = TaskCancelRequest.extend({ requested_at: time });
  const progress = z.array(ProgressEntry.pick({ seq: true, progress: true }).extend({ at: time }));

  const historyEntry = {
    assignment_id: Id,
    tool_call_id: Id.nullable(),
    tool_name: z.string(),
    arguments: z.unknown(),
    state: z.enum(ASSIGNMENT_STATES),
    context_preview: contextPreviewSchema
      .nullable()
      .describe(
        "The stored projection of the first completed receipt, computed once; for a call that submitted a background task, its submission (never cut). Never the full receipt",
      ),
    outcome: ErrorOrReason.nullable().describe("Error or reason of a failed, cancelled or reconciliation_required call (not budgeted: protocol-protected)"),
    compensated_by: Id.nullable().describe("The compensation undoing this completed write; this entry's projection stays as it was"),
    task: task
      .nullable()
      .describe("The background task this call submitted; context_preview is then the submission, and the task's result is an entry of task_results"),
    created_at: time,
  };

  return {
    /** One tool call as the model sees it: its call, its state, and for a completed one the stored projection. */
    HistoryEntry: z.object(historyEntry),
    /** An assignment for operators and runtimes: state, claim holder, receipts, progress; never the claim token's digest. */
    Assignment: z.object({
      ...historyEntry,
      run_id: Id,
      binding_id: Id,
      tool_kind: ToolKind,
      argument_digest: Sha256Hex,
      operation_key: z.string(),
      generation: z.number().int(),
      executor_id: Id.nullable(),
      lease_expires_at: time.nullable(),
      accepted_receipt_id: Id.nullable(),
      final_receipt_id: Id.nullable(),
      progress,
      compensates: Id.nullable().describe("On a compensation: the completed write it undoes"),
      task_cancel: taskCancel.nullable().describe("A business-task cancel was requested; the executor's receipt decides the outcome"),
      settled_by: OperatorSettled.extend({ at: time }).nullable().describe("The operator who settled it from reconciliation_required"),
      updated_at: time,
    }),
    /** A background task's outcome as its own history entry, after `after_tool_calls` tool calls of the run. */
    TaskResultEntry: z.object({
      assignment_id: Id,
      tool_call_id: Id.nullable(),
      tool_name: z.string(),
      task_ref: z.string(),
      receipt_id: Id.nullable().describe("The final receipt that settled the task; null when its deadline passed"),
      state: z.enum(OUTCOME_KINDS),
      context_preview: contextPreviewSchema.nullable().describe("For completed: the stored projection of its result, computed once with the tool's budget"),
      outcome: ErrorOrReason.nullable().describe("For the others: the error or reason (protocol-protected, never cut)"),
      after_tool_calls: z.number().int().nonnegative().describe("The entry follows this many tool calls of the run in the model's history"),
      at: time,
    }),
    /** One background task of a run: the task its call submitted, its progress, how many results it has. */
    RunTask: z.object({
      assignment_id: Id,
      tool_call_id: Id.nullable(),
      tool_name: z.string(),
      state: z.enum(ASSIGNMENT_STATES).describe("submitted while the task runs; then how it was settled"),
      task,
      task_cancel: taskCancel.nullable(),
      progress,
      results: z.number().int().nonnegative().describe("How many of the run's task_results are this task's settlements"),
    }),
  };
}

/** The views as the history reader builds them: times as epoch milliseconds. */
type ReaderViews = ReturnType<typeof viewSchemas<typeof Millis>>;
export type HistoryEntry = z.infer<ReaderViews["HistoryEntry"]>;
export type AssignmentView = z.infer<ReaderViews["Assignment"]>;
export type TaskResultEntry = z.infer<ReaderViews["TaskResultEntry"]>;
export type RunTask = z.infer<ReaderViews["RunTask"]>;
