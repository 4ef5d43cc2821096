/**
 * The assignment state machine: ONE table. Every state change of an assignment anywhere in the
 * gateway goes through {@link nextAssignmentState}; `docs/protocol.md` carries the same table and a
 * test keeps the two equal.
 */

export const ASSIGNMENT_STATES = [
  "pending",
  "claimed",
  "running",
  "submitted",
  "completed",
  "failed",
  "cancelled",
  "reconciliation_required",
  "withdrawn",
  "revoked",
  "abandoned",
] as const;
export type AssignmentState = (typeof ASSIGNMENT_STATES)[number];

export const ASSIGNMENT_EVENTS = [
  "claim",
  "reoffer",
  "expire_lease",
  "release",
  "accept",
  "refuse",
  "progress",
  "request_task_cancel",
  "submit",
  "expire_task",
  "complete",
  "fail",
  "cancel",
  "require_reconciliation",
  "withdraw",
  "revoke",
  "abandon",
  "detach",
  "retry_read",
] as const;
export type AssignmentEvent = (typeof ASSIGNMENT_EVENTS)[number];

export interface Transition {
  readonly from: AssignmentState;
  readonly event: AssignmentEvent;
  readonly to: AssignmentState;
  /** Why this edge exists (rendered into the docs). */
  readonly why: string;
}

export const ASSIGNMENT_TRANSITIONS: readonly Transition[] = [
  { from: "pending", event: "claim", to: "claimed", why: "an online executor of the binding's scope won the compare-and-set" },
  { from: "pending", event: "reoffer", to: "pending", why: "its candidate was taken but never claimed (the executor vanished): offered again, generation + 1" },
  { from: "claimed", event: "expire_lease", to: "pending", why: "no `accepted` within the lease: back to the candidates, generation + 1" },
  {
    from: "claimed",
    event: "release",
    to: "pending",
    why: "its executor detached before `accepted`, or the claim was given back at once (its slot was refused: the executor held its maximum of claims): back to the candidates for another executor, generation + 1",
  },
  { from: "claimed", event: "accept", to: "running", why: "`accepted` with the claim token: the explicit confirmation, side effects may start" },
  {
    from: "claimed",
    event: "refuse",
    to: "failed",
    why: "`refused` with the claim token: the executor turned the grant down before any side effect (its code: digest, arguments, authorize)",
  },
  { from: "running", event: "progress", to: "running", why: "`progress` is stored by seq, the state does not move" },
  {
    from: "running",
    event: "request_task_cancel",
    to: "running",
    why: "a business-task cancel is recorded and the executor asked; only its `cancelled` (or `completed`) moves the state",
  },
  { from: "running", event: "complete", to: "completed", why: "`completed`: the projection is computed once and stored" },
  { from: "running", event: "fail", to: "failed", why: "`failed`: a business failure the product confirmed" },
  { from: "running", event: "cancel", to: "cancelled", why: "`cancelled`: the business task stopped, product-confirmed" },
  {
    from: "running",
    event: "require_reconciliation",
    to: "reconciliation_required",
    why: "`reconciliation_required`: the outcome is unknown (ordinary exception, crash mid-handler)",
  },
  {
    from: "running",
    event: "submit",
    to: "submitted",
    why: "`submission`: the business task goes on in the background under its `task_ref`; the tool call is answered with it (never cut), the run goes on",
  },
  { from: "submitted", event: "progress", to: "submitted", why: "the background task's `progress`, stored by seq like any progress" },
  {
    from: "submitted",
    event: "request_task_cancel",
    to: "submitted",
    why: "a business-task cancel is recorded and the executor asked to stop the task; only its `cancelled` (or the `completed` that won the race) moves the state",
  },
  {
    from: "submitted",
    event: "complete",
    to: "completed",
    why: "the task's `completed`: its result enters history as its own entry, projected once with the tool's budget",
  },
  { from: "submitted", event: "fail", to: "failed", why: "the task's `failed`: a business failure the product confirmed" },
  { from: "submitted", event: "cancel", to: "cancelled", why: "the task's `cancelled`: the product confirmed the task stopped" },
  {
    from: "submitted",
    event: "require_reconciliation",
    to: "reconciliation_required",
    why: "the task's `reconciliation_required`: the product cannot tell what it did",
  },
  {
    from: "submitted",
    event: "expire_task",
    to: "reconciliation_required",
    why: "the tool's `task_deadline_ms` passed without a final receipt: the outcome is unknown, never failed or retried (no claim lease applies to a submitted task)",
  },
  { from: "reconciliation_required", event: "complete", to: "completed", why: "the product reconciled: the operation did happen" },
  { from: "reconciliation_required", event: "fail", to: "failed", why: "the product reconciled: the operation did not happen" },
  { from: "reconciliation_required", event: "cancel", to: "cancelled", why: "the product reconciled: the operation was cancelled" },
  { from: "pending", event: "withdraw", to: "withdrawn", why: "the run ended: the candidate message is deleted" },
  { from: "claimed", event: "revoke", to: "revoked", why: "the run ended before `accepted`: the claim token is dead" },
  { from: "running", event: "abandon", to: "abandoned", why: "the run ended while confirmed work ran: the executor is told, its later receipts are late" },
  {
    from: "submitted",
    event: "abandon",
    to: "abandoned",
    why: "the run ended while its task ran in the background: the executor is told (the product may stop the task), the task's later receipts are late",
  },
  {
    from: "running",
    event: "detach",
    to: "reconciliation_required",
    why: "its executor left (detach, presence expired, or its held-claims report left the claim out) with confirmed work: the outcome is unknown, never re-run elsewhere; the executor's own final receipt may still settle it",
  },
  { from: "running", event: "retry_read", to: "pending", why: "as `detach`, but a read whose binding says `retry_reads_safe`: offered again, generation + 1" },
];

/** States nothing leaves. `reconciliation_required` is not one: the product may still settle it. */
export const TERMINAL_ASSIGNMENT_STATES: ReadonlySet<AssignmentState> = new Set(["completed", "failed", "cancelled", "withdrawn", "revoked", "abandoned"]);

const byEdge = new Map(ASSIGNMENT_TRANSITIONS.map((t) => [`${t.from}:${t.event}`, t.to]));

/** The state `event` leads to from `state`, or `undefined` when the table has no such edge. */
export function nextAssignmentState(state: AssignmentState, event: AssignmentEvent): AssignmentState | undefined {
  return byEdge.get(`${state}:${event}`);
}

export function isTerminalAssignmentState(state: AssignmentState): boolean {
  return TERMINAL_ASSIGNMENT_STATES.has(state);
}

/** What the end of a run does to each of its assignments (withdraw, revoke, abandon, or nothing). */
export const RUN_END_EVENTS: readonly AssignmentEvent[] = ["withdraw", "revoke", "abandon"];

/** The states only a run's end leads to: an assignment in one tells by itself that its run has ended. */
const RUN_END_STATES: ReadonlySet<AssignmentState> = new Set(ASSIGNMENT_TRANSITIONS.filter((t) => RUN_END_EVENTS.includes(t.event)).map((t) => t.to));

export function isRunEndState(state: AssignmentState): boolean {
  return RUN_END_STATES.has(state);
}

/** The Markdown table `docs/protocol.md` carries (a test checks the doc against it). */
export function renderAssignmentTable(): string {
  const rows = ASSIGNMENT_TRANSITIONS.map((t) => `| \`${t.from}\` | \`${t.event}\` | \`${t.to}\` | ${t.why} |`);
  const terminal = ASSIGNMENT_STATES.filter(isTerminalAssignmentState).map((s) => `\`${s}\``);
  return ["| from | event | to | why |", "| --- | --- | --- | --- |", ...rows, "", `Terminal: ${terminal.join(", ")}.`].join("\n");
}
