import { z } from "zod";
import { Id, Millis, ToolKind, oneOrMany } from "../../wire/primitives.js";
import { ASSIGNMENT_STATES, type AssignmentState } from "../model/assignment-states.js";
import { OUTCOME_KINDS, Outcome, type AssignmentRecord, type ProgressEntry, type RunRecord } from "../model/records.js";
import { RUN_STATES } from "../model/run-states.js";

/**
 * What a run's event stream (`tg.evt.<run>`, SSE) says: state changes of the run and of its
 * assignments, progress, and the section-4 requests. Never a full result: a client reads the
 * assignment or the history for that.
 */
export const RunEvent = z
  .discriminatedUnion("type", [
    z.object({ type: z.literal("run"), run_id: Id, state: z.enum(RUN_STATES), at: Millis }).strict(),
    z
      .object({
        type: z.literal("assignment"),
        run_id: Id,
        assignment_id: Id,
        tool_name: z.string(),
        tool_kind: ToolKind,
        /** null when the assignment was just created. */
        from: z.enum(ASSIGNMENT_STATES).nullable(),
        to: z.enum(ASSIGNMENT_STATES),
        generation: z.number().int().nonnegative(),
        executor_id: Id.nullable(),
        compensates: Id.nullable(),
        outcome: Outcome.nullable(),
        at: Millis,
      })
      .strict(),
    z.object({ type: z.literal("progress"), run_id: Id, assignment_id: Id, seq: z.number().int().positive(), progress: z.unknown(), at: Millis }).strict(),
    z.object({ type: z.literal("task_cancel_requested"), run_id: Id, assignment_id: Id, reason: z.string(), at: Millis }).strict(),
    z.object({ type: z.literal("compensation_requested"), run_id: Id, assignment_id: Id, compensation_assignment_id: Id, at: Millis }).strict(),
    /** A background task's outcome entered the history as its own entry (read it from the history). */
    z
      .object({
        type: z.literal("task_result"),
        run_id: Id,
        assignment_id: Id,
        state: z.enum(OUTCOME_KINDS),
        after_tool_calls: z.number().int().nonnegative(),
        at: Millis,
      })
      .strict(),
  ])
  .meta({ id: "RunEvent" });
export type RunEvent = z.infer<typeof RunEvent>;

/**
 * One message of the event stream: an event, or (store layout 5) the events of one write when there
 * are several, in their order. Read in both forms, whatever layout this gateway writes.
 */
export const RunEventMessage = oneOrMany(RunEvent, 2);
export type RunEventMessage = z.infer<typeof RunEventMessage>;

/**
 * The events one assignment write means: progress reports it recorded (first: a write that also
 * settles the assignment recorded the report before the final receipt), then its state or generation
 * moving, a task cancel or a compensation recorded. A write that applied a read's `accepted` together
 * with what the read sent behind it tells the assignment's pass through `running` first, as the
 * writes one at a time would have.
 */
export function assignmentEvents(before: AssignmentRecord | undefined, after: AssignmentRecord): RunEvent[] {
  const base = { run_id: after.run_id, assignment_id: after.assignment_id, at: after.updated_at };
  const stateEvent = (from: AssignmentState | null, to: AssignmentState, at: number, outcome: Outcome | null): RunEvent => ({
    type: "assignment",
    ...base,
    tool_name: after.tool_name,
    tool_kind: after.tool_kind,
    from,
    to,
    generation: after.generation,
    executor_id: after.claim?.executor_id ?? null,
    compensates: after.compensates,
    outcome,
    at,
  });
  const events: RunEvent[] = [];
  let from = before?.state ?? null;
  if (before && !before.accepted && after.accepted && from !== "running" && after.state !== "running") {
    events.push(stateEvent(from, "running", after.accepted.at, null));
    from = "running";
  }
  for (const entry of (after.progress_log ?? []).slice(before?.progress_log?.length ?? 0)) events.push(progressEvent(after.run_id, entry));
  if (from !== after.state || before?.generation !== after.generation) events.push(stateEvent(from, after.state, after.updated_at, after.outcome));
  if (after.task_cancel && !before?.task_cancel) events.push({ type: "task_cancel_requested", ...base, reason: after.task_cancel.reason });
  if (after.compensated_by && !before?.compensated_by)
    events.push({ type: "compensation_requested", ...base, compensation_assignment_id: after.compensated_by });
  return events;
}

/**
 * The events of a run write: its state moved, or background task results were appended (appending a
 * tool call is told by the assignment's own event).
 */
export function runEvents(before: RunRecord | undefined, after: RunRecord): RunEvent[] {
  const events: RunEvent[] = (after.task_results ?? []).slice(before?.task_results?.length ?? 0).map((t) => ({
    type: "task_result",
    run_id: after.run_id,
    assignment_id: t.assignment_id,
    state: t.outcome.kind,
    after_tool_calls: t.after_tool_calls,
    at: t.at,
  }));
  if (before && before.state === after.state) return events;
  return [{ type: "run", run_id: after.run_id, state: after.state, at: after.ended_at ?? after.created_at }, ...events];
}

export function progressEvent(runId: string, entry: ProgressEntry): RunEvent {
  return { type: "progress", run_id: runId, assignment_id: entry.assignment_id, seq: entry.seq, progress: entry.progress, at: entry.at };
}
