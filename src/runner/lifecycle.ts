/**
 * The ToolRunner's own lifecycle, as ONE table: every change of the runner's state goes through
 * {@link nextRunnerState}; `docs/runner.md` carries the same table and a test keeps the two equal.
 * (One claim's phases are another table: `phases.ts`.)
 */

export const RUNNER_STATES = ["starting", "running", "detaching", "detached", "closing", "closed"] as const;
export type RunnerState = (typeof RUNNER_STATES)[number];

export const RUNNER_EVENTS = ["start", "detach", "drain", "close", "finish"] as const;
export type RunnerEvent = (typeof RUNNER_EVENTS)[number];

interface RunnerTransition {
  readonly from: RunnerState;
  readonly event: RunnerEvent;
  readonly to: RunnerState;
  /** Why this edge exists (rendered into the docs). */
  readonly why: string;
}

export const RUNNER_TRANSITIONS: readonly RunnerTransition[] = [
  {
    from: "starting",
    event: "start",
    to: "running",
    why: "store open, connected, presence sent, the store's open claims reported to the gateway (`tg.held`) and resumed: pulling begins",
  },
  { from: "starting", event: "close", to: "closing", why: "the start failed: what it opened is closed again" },
  { from: "running", event: "detach", to: "detaching", why: "`detach()`, or the gateway's `detach_requested`: pulling stops, presence says `detaching`" },
  { from: "running", event: "close", to: "closing", why: "`close()`: pulling stops, presence says `detaching`, running handlers get the deadline" },
  { from: "detaching", event: "drain", to: "detached", why: "no claim is held any more: confirmed work finished and was answered; presence lapses" },
  { from: "detaching", event: "close", to: "closing", why: "`close()` while detaching: the handlers still running get the deadline" },
  { from: "detached", event: "close", to: "closing", why: "`close()` after a detach: `reconcile` worked until now" },
  { from: "closing", event: "finish", to: "closed", why: "handlers finished or reported `executor_shutdown`, the outbox flushed, connection and store closed" },
];

const byEdge = new Map(RUNNER_TRANSITIONS.map((t) => [`${t.from}:${t.event}`, t.to]));

/** The state `event` leads to from `state`; throws when the table has no such edge (a bug of the runner). */
export function nextRunnerState(state: RunnerState, event: RunnerEvent): RunnerState {
  const to = byEdge.get(`${state}:${event}`);
  if (to === undefined) throw new Error(`runner: '${event}' is not allowed while ${state}`);
  return to;
}

/** Whether `event` may happen in `state`. */
export function runnerAllows(state: RunnerState, event: RunnerEvent): boolean {
  return byEdge.has(`${state}:${event}`);
}

/** What each state lets the runner do (rendered beside the table). */
export const RUNNER_STATE_RULES: Readonly<Record<RunnerState, { pulls: boolean; heartbeats: boolean; startsHandlers: boolean }>> = {
  starting: { pulls: false, heartbeats: true, startsHandlers: true },
  running: { pulls: true, heartbeats: true, startsHandlers: true },
  detaching: { pulls: false, heartbeats: true, startsHandlers: true },
  detached: { pulls: false, heartbeats: false, startsHandlers: true },
  closing: { pulls: false, heartbeats: true, startsHandlers: false },
  closed: { pulls: false, heartbeats: false, startsHandlers: false },
};

/** The Markdown table `docs/runner.md` carries (a test checks the doc against it). */
export function renderRunnerLifecycleTable(): string {
  const yes = (b: boolean) => (b ? "yes" : "no");
  const edges = RUNNER_TRANSITIONS.map((t) => `| \`${t.from}\` | \`${t.event}\` | \`${t.to}\` | ${t.why} |`);
  const rules = RUNNER_STATES.map(
    (s) => `| \`${s}\` | ${yes(RUNNER_STATE_RULES[s].pulls)} | ${yes(RUNNER_STATE_RULES[s].heartbeats)} | ${yes(RUNNER_STATE_RULES[s].startsHandlers)} |`,
  );
  return [
    "| from | event | to | why |",
    "| --- | --- | --- | --- |",
    ...edges,
    "",
    "| state | pulls candidates | sends presence | starts confirmed handlers |",
    "| --- | --- | --- | --- |",
    ...rules,
  ].join("\n");
}
