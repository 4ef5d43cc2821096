import { z } from "zod";
import { contextPreviewSchema } from "../../budget/index.js";
import { ReceiptKind, ReceiptStatus, RefusalCode, TaskSubmission } from "../../wire/messages.js";
import { ErrorBody, Id, Millis, Reason, Sha256Hex, ToolKind } from "../../wire/primitives.js";
import { ASSIGNMENT_STATES } from "./assignment-states.js";
import { RUN_EVENTS, RUN_STATES } from "./run-states.js";

/**
 * The records the execution path keeps in JetStream KV (msgpack, validated on every read).
 * Field names are snake_case like the wire messages and the HTTP API, so a record can be shown as is.
 */

/** One claim of an assignment. Only the token's sha256 is kept: the token itself exists only in the grant. */
export const ClaimRecord = z
  .object({
    executor_id: Id,
    generation: z.number().int().nonnegative(),
    token_sha256: Sha256Hex,
    claimed_at: Millis,
    lease_expires_at: Millis,
  })
  .strict();
export type ClaimRecord = z.infer<typeof ClaimRecord>;

/** A receipt that moved the assignment (accepted, or the final one). */
export const AppliedReceipt = z
  .object({
    receipt_id: Id,
    kind: ReceiptKind,
    body_digest: Sha256Hex,
    /** Sequence of the full receipt in `TG_RECEIPTS` (the projection is rebuilt from it after a crash). */
    stream_seq: z.number().int().positive(),
    at: Millis,
  })
  .strict();
export type AppliedReceipt = z.infer<typeof AppliedReceipt>;

/** An applied receipt that a later edge took off `accepted` / `final`, with the executor of the claim it was applied under. */
export const ReplacedReceipt = AppliedReceipt.extend({ executor_id: Id });
export type ReplacedReceipt = z.infer<typeof ReplacedReceipt>;

/** The outcome of a call that ended without a result: the error (failed, reconciliation_required) or the reason (cancelled). */
export const ErrorOrReason = z.union([
  z.object({ kind: z.enum(["failed", "reconciliation_required"]), error: ErrorBody }).strict(),
  z.object({ kind: z.literal("cancelled"), reason: Reason }).strict(),
]);
export type ErrorOrReason = z.infer<typeof ErrorOrReason>;

/** What a final receipt says beyond its kind (the result itself stays in the stream and the projection). */
export const Outcome = z.union([z.object({ kind: z.literal("completed") }).strict(), ...ErrorOrReason.options]);
export type Outcome = z.infer<typeof Outcome>;

/** How an outcome ends a call: also the state it leaves the call in (a background task's result entry names it so). */
export const OUTCOME_KINDS = ["completed", "failed", "cancelled", "reconciliation_required"] as const satisfies readonly Outcome["kind"][];

/** A business task the assignment's `submission` left running in the background (set once, never changed). */
export const SubmittedTask = TaskSubmission.extend({ submitted_at: Millis, deadline_at: Millis });
export type SubmittedTask = z.infer<typeof SubmittedTask>;

/**
 * One outcome of a background task as its own history entry: appended to the run once per final
 * receipt (or deadline) that settled the task, after the tool calls made so far, never changed.
 */
export const TaskResult = z
  .object({
    assignment_id: Id,
    /** The final receipt that settled it; null for the task deadline. */
    receipt_id: Id.nullable(),
    outcome: Outcome,
    /** How many tool calls the run had when it arrived: the entry sits after them in history. */
    after_tool_calls: z.number().int().nonnegative(),
    at: Millis,
  })
  .strict();
export type TaskResult = z.infer<typeof TaskResult>;

/** A business-task cancel asked for (recorded once; only the executor's receipt ends the task). */
export const TaskCancelRequest = z.object({ requested_at: Millis, reason: z.string() }).strict();

/** Who settled a `reconciliation_required` assignment over HTTP, and when. */
export const OperatorSettled = z.object({ operator: z.string(), at: Millis }).strict();

/** The end recorded on a run that is still `active` while its assignments are settled (see `RunEndStatus`). */
export const RunEnding = z
  .object({
    event: z.enum(RUN_EVENTS),
    /** When the end was asked for; `ended_at` is when the run became terminal. */
    at: Millis,
  })
  .strict();
export type RunEnding = z.infer<typeof RunEnding>;

export const RunRecord = z
  .object({
    run_id: Id,
    session_id: Id,
    agent: Id,
    agent_version: z.string(),
    toolset: Id,
    toolset_version: z.string(),
    subject: z.string(),
    state: z.enum(RUN_STATES),
    /** Every tool call of the run, in creation order; appended by compare-and-set while `active` only. */
    assignment_ids: z.array(Id),
    /** Outcomes of background tasks, each its own history entry in arrival order (`src/execution/tasks/`); absent until the first. */
    task_results: z.array(TaskResult).optional(),
    created_at: Millis,
    /**
     * Set while the run is being ended, removed by the write that makes it terminal: a run whose end
     * was recorded takes no more tool calls or claims. Absent from every other run (and from records
     * of earlier versions), so a terminal record keeps the shape an earlier release reads.
     */
    ending: RunEnding.optional(),
    ended_at: Millis.nullable(),
  })
  .strict();
export type RunRecord = z.infer<typeof RunRecord>;

/**
 * One stored progress report: in its assignment record's `progress_log` (store layout 4), or an
 * entry of the progress bucket keyed `<assignment>.<seq>`. Under store layout 3, a bucket entry whose
 * receipt id is the one bound to its claim (`receiptId`, which names the assignment and the seq, so
 * the entry is found from the id alone) is also that receipt's index entry (`indexed`): no entry of
 * the receipt index is written for it. An entry of a record's log is always indexed: every lookup of
 * a receipt reads the assignment it names.
 */
export const ProgressEntry = z
  .object({
    assignment_id: Id,
    seq: z.number().int().positive(),
    receipt_id: Id,
    progress: z.unknown(),
    at: Millis,
    indexed: z.object({ executor_id: Id, body_digest: Sha256Hex, stream_seq: z.number().int().positive() }).strict().optional(),
  })
  .strict();
export type ProgressEntry = z.infer<typeof ProgressEntry>;

/**
 * The context projection of a completed assignment as its record carries it (store layout 2): formed
 * by the compare-and-set that completed it, so it is stored exactly once, with the completion.
 */
export const CarriedProjection = z.object({ receipt_id: Id, context_preview: contextPreviewSchema, computed_at: Millis }).strict();
export type CarriedProjection = z.infer<typeof CarriedProjection>;

export const AssignmentRecord = z
  .object({
    assignment_id: Id,
    run_id: Id,
    /** The runtime's id of the tool call (the idempotency key of its creation), when it gave one. */
    tool_call_id: Id.nullable(),
    tool_name: z.string(),
    binding_id: Id,
    scope: Id,
    tool_kind: ToolKind,
    arguments: z.unknown(),
    argument_digest: Sha256Hex,
    operation_key: z.string(),
    max_result_context_bytes: z.number().int().positive(),
    /** The tool's `preserve_fields`, applied when the projection is formed. */
    preserve_fields: z.array(z.string()).optional(),
    /** The tool's `task_deadline_ms`: how long a submitted task may run before it needs reconciliation. */
    task_deadline_ms: z.number().int().positive().optional(),
    state: z.enum(ASSIGNMENT_STATES),
    /** Bumped each time the assignment goes back to the candidates. */
    generation: z.number().int().nonnegative(),
    /**
     * Stream sequence of the candidate, as versions before candidates had a subject per assignment
     * recorded it; no longer written (a candidate is found by its subject), read for old records only.
     */
    candidate_seq: z.number().int().positive().nullable(),
    /** The current claim (claimed, running and what followed); null while pending. */
    claim: ClaimRecord.nullable(),
    /** Earlier claims (expired or revoked), newest last, so a stale token is told apart from a forged one. */
    past_claims: z.array(ClaimRecord),
    accepted: AppliedReceipt.nullable(),
    final: AppliedReceipt.nullable(),
    outcome: Outcome.nullable(),
    /**
     * Receipts applied here that a later edge replaced (a retried read's `accepted`, the
     * `reconciliation_required` its settlement replaced), so the assignment keeps answering for every
     * receipt it applied. Absent until needed, so the common record stays readable by a replica of
     * the previous release during a rolling upgrade.
     */
    replaced: z.array(ReplacedReceipt).optional(),
    /** A business-task cancel was asked for (recorded once; only the executor's receipt ends the task). */
    task_cancel: TaskCancelRequest.nullable().default(null),
    /** The business task a `submission` left running (state `submitted`, then whatever settled it); absent for a synchronous call, so such records stay readable by the previous release. */
    task: SubmittedTask.optional(),
    /** On a compensation: the completed write it undoes. A compensation lives outside its run's lifecycle. */
    compensates: Id.nullable().default(null),
    /** On a compensated write: its compensation (set once; the original's receipt and projection stay as they are). */
    compensated_by: Id.nullable().default(null),
    /** Who settled a `reconciliation_required` assignment over HTTP (its `final` is then the operator receipt). */
    settled_by: OperatorSettled.nullable().default(null),
    /**
     * A completed call's projection, written by the compare-and-set that completed it (store layout
     * 2). Absent under layout 1, which keeps it in the projections bucket: a release before layout 2
     * cannot read a record that carries it.
     */
    projection: CarriedProjection.optional(),
    /**
     * Progress reports, each carried by the compare-and-set that recorded it (store layout 4), by
     * arrival, until one does not fit (`progress_in_bucket`).
     * Absent until the first: a release before layout 4 cannot read a record that carries one.
     */
    progress_log: z.array(ProgressEntry).optional(),
    /**
     * Set by the compare-and-set of the first report the record had no room for: that report and
     * every later one are entries of the progress bucket (so a seq is in one place only).
     */
    progress_in_bucket: z.literal(true).optional(),
    /**
     * Run events of writes of this record not published yet, in order (store layout 7: a creation's and
     * a claim's, `src/execution/events/assignment-events.ts`); the next write publishes them before its
     * own. Each a `RunEvent`, checked loosely here: that schema is built on this module's.
     * Absent when none: a release before layout 7 cannot read a record that carries them.
     */
    deferred_events: z.array(z.looseObject({ type: z.string(), run_id: Id })).optional(),
    created_at: Millis,
    updated_at: Millis,
  })
  .strict();
export type AssignmentRecord = z.infer<typeof AssignmentRecord>;

/** What an assignment holds before anything happened to it: pending, generation 0, no claim, receipt or link. */
export function unstartedAssignment() {
  return {
    state: "pending",
    generation: 0,
    candidate_seq: null,
    claim: null,
    past_claims: [],
    accepted: null,
    final: null,
    outcome: null,
    task_cancel: null,
    compensated_by: null,
    settled_by: null,
  } satisfies Partial<AssignmentRecord>;
}

/**
 * The permanent receipt index: one entry per receipt_id, written once, for every receipt with a
 * valid claim proof that no assignment's compare-and-set applied (progress, refusals, late
 * receipts); one it applied is indexed by its assignment's `accepted` / `final` / `replaced`.
 */
export const ReceiptIndexEntry = z
  .object({
    receipt_id: Id,
    assignment_id: Id,
    executor_id: Id,
    kind: ReceiptKind,
    body_digest: Sha256Hex,
    status: ReceiptStatus.exclude(["pending", "duplicate"]),
    code: RefusalCode.optional(),
    reason: z.string().optional(),
    stream_seq: z.number().int().positive(),
    at: Millis,
  })
  .strict();
export type ReceiptIndexEntry = z.infer<typeof ReceiptIndexEntry>;

/** Executor presence, keyed `<scope>.<executor>`; lives as long as heartbeats refresh it. */
export const PresenceRecord = z
  .object({
    executor_id: Id,
    scope: Id,
    bindings: z.array(Id),
    /** `detached`: an operator detached it; its heartbeats are refused until this record lapses. */
    status: z.enum(["online", "detaching", "detached"]),
    in_flight: z.number().int().nonnegative(),
    seen_at: Millis,
  })
  .strict();
export type PresenceRecord = z.infer<typeof PresenceRecord>;

/** A sweeper watch: this assignment needs looking at once `due_at` has passed. */
export const AssignmentWatch = z.object({ assignment_id: Id, due_at: Millis }).strict();
export type AssignmentWatch = z.infer<typeof AssignmentWatch>;

/** A sweeper watch over a run's end: written before the end is recorded, removed once it is finished. */
export const RunEndWatch = z.object({ run_id: Id, due_at: Millis }).strict();
export type RunEndWatch = z.infer<typeof RunEndWatch>;

export const WatchEntry = z.union([AssignmentWatch, RunEndWatch]);
export type WatchEntry = z.infer<typeof WatchEntry>;

/** The context projection of a completed assignment: computed once, served forever (its own create-only entry under store layout 1). */
export const ProjectionRecord = z.object({ assignment_id: Id, ...CarriedProjection.shape }).strict();
export type ProjectionRecord = z.infer<typeof ProjectionRecord>;

/** One claim an executor holds or is about to win (reserved before the assignment's compare-and-set). */
export const HeldClaim = z.object({ assignment_id: Id, generation: z.number().int().nonnegative(), reserved_at: Millis }).strict();
export type HeldClaim = z.infer<typeof HeldClaim>;

/** The claims of one executor, keyed `<scope>.<executor>`; entries whose work ended are dropped lazily. */
export const ClaimHoldings = z.object({ executor_id: Id, scope: Id, held: z.array(HeldClaim) }).strict();
export type ClaimHoldings = z.infer<typeof ClaimHoldings>;
