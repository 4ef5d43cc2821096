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
 * unseen; an event of this assignment reaching a state of `until` is confirmed by reading the
 * record (events are notifications, the record is the truth). Nothing is made on the server for the
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
  const arrivals = new Arrivals(signal);
  const subscription = sources.events.subscribe(call.run_id, (event, err) => {
    if (err) return arrivals.fail(err);
    if (!event || !("assignment_id" in event) || event.assignment_id !== call.assignment_id) return;
    if (event.type === "progress") report({ seq: event.seq, progress: event.progress, at: event.at });
    if (event.type === "assignment" && until.has(event.to)) arrivals.settled();
  });
  try {
    let current = await sources.history.assignment(call.assignment_id);
    current.progress.forEach(report);
    while (!until.has(current.state)) {
      const why = await arrivals.next(recheckMs);
      if (why === "aborted") return undefined;
      // Settled by an event (its progress came before it), or a quiet spell that may hide a lost event.
      current = await sources.history.assignment(call.assignment_id, { withProgress: why === "quiet" });
      current.progress.forEach(report);
      if (why === "failed" && !until.has(current.state)) throw arrivals.error;
    }
    return current;
  } finally {
    subscription.unsubscribe();
    arrivals.close();
  }
}

/** What woke a wait: its assignment reached a state waited for, nothing came for a while, the subscription failed, or the wait was aborted. */
type Arrival = "settled" | "quiet" | "failed" | "aborted";

/** What a wait is told of: `next` resolves at once with what came while no one waited (the strongest of it). */
class Arrivals {
  private pending: Arrival | undefined;
  private wake: ((why: Arrival) => void) | undefined;
  error: Error | undefined;

  private readonly onAbort = () => this.arrive("aborted");

  constructor(private readonly signal: AbortSignal) {
    signal.addEventListener("abort", this.onAbort, { once: true });
    if (signal.aborted) this.pending = "aborted";
  }

  /** Stops listening to the signal, which may outlive the wait (an MCP session's). */
  close(): void {
    this.signal.removeEventListener("abort", this.onAbort);
  }

  settled(): void {
    this.arrive("settled");
  }

  fail(err: Error): void {
    this.error = err;
    this.arrive("failed");
  }

  next(quietMs: number): Promise<Arrival> {
    if (this.pending) {
      const why = this.pending;
      this.pending = undefined;
      return Promise.resolve(why);
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.arrive("quiet"), quietMs);
      this.wake = (why) => {
        clearTimeout(timer);
        resolve(why);
      };
    });
  }

  /** A stronger arrival is never hidden by a weaker one that follows before anyone looked. */
  private arrive(why: Arrival): void {
    const wake = this.wake;
    if (wake) {
      this.wake = undefined;
      return wake(why);
    }
    if (!this.pending || RANK[why] > RANK[this.pending]) this.pending = why;
  }
}

const RANK: Readonly<Record<Arrival, number>> = { quiet: 0, settled: 1, failed: 2, aborted: 3 };
