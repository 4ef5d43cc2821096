/** The run state machine: `active` until the runtime completes or cancels it; both ends are final. */

export const RUN_STATES = ["active", "completed", "cancelled"] as const;
export type RunState = (typeof RUN_STATES)[number];

export type RunEvent = "complete" | "cancel";

const RUN_TRANSITIONS: Readonly<Record<RunEvent, { from: RunState; to: RunState }>> = {
  complete: { from: "active", to: "completed" },
  cancel: { from: "active", to: "cancelled" },
};

export function nextRunState(state: RunState, event: RunEvent): RunState | undefined {
  const edge = RUN_TRANSITIONS[event];
  return edge.from === state ? edge.to : undefined;
}

/** The state `event` ends a run in (to tell an idempotent repeat from a conflicting end). */
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
 * Whether work on `assignment` may still be claimed and reported: while its run is active, and
 * always for a compensation (its own operation, asked for after the fact, often after the run ended).
 */
export function runTakesWork(assignment: { compensates: string | null }, run: { state: RunState } | null): boolean {
  return assignment.compensates !== null || run?.state === "active";
}
