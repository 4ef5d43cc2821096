import type { RunEventLog } from "../execution/events/event-log.js";
import type { RunEvent } from "../execution/events/run-events.js";
import type { HistoryReader } from "../execution/runs/history.js";
import type { AssignmentView } from "../execution/runs/views.js";

/** States a call is settled in: it has an outcome, or needs an operator (never reported as success). */
export const SETTLED = new Set<AssignmentView["state"]>(["completed", "failed", "cancelled", "reconciliation_required", "withdrawn", "revoked", "abandoned"]);
/**
 * States a plain `tools/call` is answered in: settled, or a background task submitted (the model
 * reads the submission, as its history shows it, and goes on; the task's outcome comes later).
 */
export const ANSWERED = new Set<AssignmentView["state"]>([...SETTLED, "submitted"]);

/** Where a tool call's answer is read (the assignment record, the truth) and waited for (the run's events). */
export interface AnswerSources {
  history: HistoryReader;
  events: RunEventLog;
}

/**
 * How long a wait goes without an event before the record is read again: an event lost to a
 * reconnect never leaves a call waiting longer than this.
 */
const RECHECK_MS = 5_000;

type EventHandler = (event: RunEvent | null, err?: Error) => void;

/**
 * A run's events subscribed to before one of its calls is created, kept until the wait for that
 * call takes them: every write after the creation is then told, so the wait can start from the
 * state the creation wrote instead of reading the record (see `Opened`).
 */
export class RunEventBuffer {
  private readonly held: Array<[RunEvent | null, Error | undefined]> = [];
  private forward: EventHandler | undefined;
  private readonly subscription: { unsubscribe(): void };

  constructor(events: RunEventLog, runId: string) {
    this.subscription = events.subscribe(runId, (event, err) => (this.forward ? this.forward(event, err) : this.held.push([event, err])));
  }

  /** Hands the events held so far to `handler`, then every later one. */
  take(handler: EventHandler): void {
    this.forward = handler;
    for (const [event, err] of this.held.splice(0)) handler(event, err);
  }

  unsubscribe(): void {
    this.subscription.unsubscribe();
  }
}

/** A call whose run's events were subscribed to before its creation, with the state the creation wrote. */
export interface Opened {
  events: RunEventBuffer;
  /** Absent when the call existed already (its tool_call_id asked again): then it is read. */
  created?: AssignmentView["state"];
}

/**
 * Waits for the assignment to reach one of `until` (default: settled) and resolves with it; resolves
 * undefined once `signal` aborts. New progress entries are handed to `onProgress` in order.
 * The run's events are subscribed to before the record is read, so no write after that read goes
 * unseen; with `opened` they were subscribed to before the call was created, and a call just
 * created is not read at all before an event says it moved (its creation wrote a state without
 * progress). An event of this assignment reaching a state of `until` is confirmed on the record
 * (events are notifications, the record is the truth): the one this process remembers when it
 * is terminal (this process most often wrote it), else one read. Nothing is made on the server for the
 * wait (no consumer): the subscription is plain, and should it lose an event (a reconnect), the
 * record is read again after `RECHECK_MS` without one. If the subscription fails, the record is read
 * once more before the failure is reported: a settled call is still answered.
 */
export async function settledView(
  sources: AnswerSources,
  call: { run_id: string; assignment_id: string },
  signal: AbortSignal,
  onProgress: (entry: AssignmentView["progress"][number]) => void,
  { until = SETTLED, recheckMs = RECHECK_MS, opened }: { until?: ReadonlySet<AssignmentView["state"]>; recheckMs?: number; opened?: Opened } = {},
): Promise<AssignmentView | undefined> {
  let seen = 0;
  const report = (entry: AssignmentView["progress"][number]) => {
    if (entry.seq <= seen) return;
    seen = entry.seq;
    onProgress(entry);
  };
  // What the subscription told since the record was last read: the call reached a state waited for,
  // or the subscription failed. `wake` ends the wait in progress, if any.
  let settledEvent = false;
  let failure: Error | undefined;
  let wake = () => {};
  const onEvent: EventHandler = (event, err) => {
    if (err) {
      failure = err;
      return wake();
    }
    if (!event || !("assignment_id" in event) || event.assignment_id !== call.assignment_id) return;
    if (event.type === "progress") report({ seq: event.seq, progress: event.progress, at: event.at });
    if (event.type === "assignment" && until.has(event.to)) {
      settledEvent = true;
      wake();
    }
  };
  const subscription = opened?.events ?? sources.events.subscribe(call.run_id, onEvent);
  opened?.events.take(onEvent);
  const onAbort = () => wake();
  signal.addEventListener("abort", onAbort, { once: true });
  try {
    const fresh = opened?.created !== undefined && !until.has(opened.created);
    let current: AssignmentView | undefined = fresh ? undefined : await sources.history.assignment(call.assignment_id);
    current?.progress.forEach(report);
    while (!current || !until.has(current.state)) {
      if (!settledEvent && !failure && !signal.aborted)
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, recheckMs);
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
      if (signal.aborted) return undefined;
      // Settled by an event (its progress came before it), or a quiet spell that may hide a lost event.
      const told = settledEvent;
      const quiet = !told && !failure;
      settledEvent = false;
      current = await sources.history.assignment(call.assignment_id, { withProgress: quiet, settled: told });
      current.progress.forEach(report);
      if (failure && !until.has(current.state)) throw failure;
    }
    return current;
  } finally {
    subscription.unsubscribe();
    signal.removeEventListener("abort", onAbort);
  }
}
