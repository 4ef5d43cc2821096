/**
 * The run state machine: `active` until the runtime completes or cancels it; both ends are final.
 * An end is recorded on the active run first (`ending`) and made terminal once its assignments are
 * settled (`RunService.end`).
 */

export const RUN_STATES = ["active", "completed", "cancelled"] as const;
export type RunState = (typeof RUN_STATES)[number];

export const RUN_EVENTS = ["complete", "cancel"] as const;
export type RunEvent = (typeof RUN_EVENTS)[number];

const RUN_TRANSITIONS: Readonly<Record<RunEvent, { from: RunState; to: RunState }>> = {
  complete: { from: "active", to: "completed" },
  cancel: { from: "active", to: "cancelled" },
};

export function nextRunState(state: RunState, event: RunEvent): RunState | undefined {
  const edge = RUN_TRANSITIONS[event];
  return edge.from === state ? edge.to : undefined;
}

/** The state `event` ends a run in. */
export function runEventTarget(event: RunEvent): RunState {
  return RUN_TRANSITIONS[event].to;
}

export function renderRunTable(): string {
  const rows = (Object.entries(RUN_TRANSITIONS) as [RunEvent, { from: RunState; to: RunState }][]).map(
    ([event, t]) => `| \`${t.from}\` | \`${event}\` | \`${t.to}\` |`,
  );
  return ["| from | event | to |", "| --- | --- | --- |", ...rows, "", "Terminal: `completed`, `cancelled`."].join("\n");
}

/**
 * A run being ended: its end is recorded (`ending`, the event that won) while it is still `active`,
 * then every listed assignment is settled, and only then is it written `completed` / `cancelled`.
 * From the moment `ending` is recorded the run takes no more tool calls and no more claims, so its
 * list of assignments is fixed; once it is terminal, each of them already carries the end.
 */
export interface RunEndStatus {
  state: RunState;
  ending?: { event: RunEvent } | undefined;
}

/** Whether the run still takes tool calls and claims: active, and no end recorded. */
export function runIsOpen(run: RunEndStatus): boolean {
  return run.state === "active" && run.ending === undefined;
}

/** The event that ends (or ended) the run, once one is recorded; the first recorded wins. */
export function runEndEvent(run: RunEndStatus): RunEvent | undefined {
  if (run.ending) return run.ending.event;
  return RUN_EVENTS.find((event) => runEventTarget(event) === run.state);
}

/**
 * Whether work on `assignment` may still be claimed and reported: while its run is open, and
 * always for a compensation (its own operation, asked for after the fact, often after the run ended).
 */
export function runTakesWork(assignment: { compensates: string | null }, run: RunEndStatus | null): boolean {
  return assignment.compensates !== null || (run !== null && runIsOpen(run));
}

/**
 * Whether the run's end reaches the assignment: the run lists it (the end settles exactly the
 * assignments listed), or it is a compensation, which hangs off its original, not off the run's list.
 */
export function runListsWork(assignment: { assignment_id: string; compensates: string | null }, run: { assignment_ids: readonly string[] }): boolean {
  return assignment.compensates !== null || run.assignment_ids.includes(assignment.assignment_id);
}
