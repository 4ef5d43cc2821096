import type { RunEventLog } from "../execution/events/event-log.js";
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

/**
 * Waits for the assignment to reach one of `until` (default: settled) and resolves with it; resolves
 * undefined once `signal` aborts. New progress entries are handed to `onProgress` in order.
 * The run's events are subscribed to before the record is read, so no write after that read goes
 * unseen; an event of this assignment reaching a state of `until` is confirmed on the record
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
  until: ReadonlySet<AssignmentView["state"]> = SETTLED,
  recheckMs = RECHECK_MS,
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
  const subscription = sources.events.subscribe(call.run_id, (event, err) => {
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
  });
  const onAbort = () => wake();
  signal.addEventListener("abort", onAbort, { once: true });
  try {
    let current = await sources.history.assignment(call.assignment_id);
    current.progress.forEach(report);
    while (!until.has(current.state)) {
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
