import type { JetStreamManager } from "@nats-io/jetstream";
import type { RunEventLog } from "../execution/events/event-log.js";
import type { HistoryReader } from "../execution/runs/history.js";
import type { AssignmentView } from "../execution/runs/views.js";
import { subjects } from "../wire/subjects.js";
import { STREAMS } from "../streams/names.js";

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
  /** The sequence of the run's newest event, 0 if it has none. */
  lastEventSeq(runId: string): Promise<number>;
}

/** `lastEventSeq` from the event stream: one read of the run subject's last message, however long the run is. */
export function lastRunEventSeq(jsm: JetStreamManager): (runId: string) => Promise<number> {
  return async (runId) => (await jsm.streams.getMessage(STREAMS.events, { last_by_subj: subjects.runEvents(runId) }))?.seq ?? 0;
}

/**
 * Waits for the assignment to reach one of `until` (default: settled) and resolves with it; resolves undefined once `signal`
 * aborts. New progress entries are handed to `onProgress` in order. The wait follows the run's
 * events from the newest one taken before the record is read, so no write after that read goes
 * unseen; an event of this assignment reaching a settled state is confirmed by reading the record
 * (events are notifications, the record is the truth). If the event stream fails, the record is
 * read once more before the failure is reported: a settled call is still answered.
 */
export async function settledView(
  sources: AnswerSources,
  call: { run_id: string; assignment_id: string },
  signal: AbortSignal,
  onProgress: (entry: AssignmentView["progress"][number]) => void,
  until: ReadonlySet<AssignmentView["state"]> = SETTLED,
): Promise<AssignmentView | undefined> {
  const after = await sources.lastEventSeq(call.run_id);
  let current = await sources.history.assignment(call.assignment_id);
  let seen = 0;
  const report = (entry: AssignmentView["progress"][number]) => {
    if (entry.seq <= seen) return;
    seen = entry.seq;
    onProgress(entry);
  };
  current.progress.forEach(report);
  if (until.has(current.state)) return current;
  try {
    for await (const { event } of sources.events.follow(call.run_id, after, signal)) {
      if (!("assignment_id" in event) || event.assignment_id !== call.assignment_id) continue;
      if (event.type === "progress") report({ seq: event.seq, progress: event.progress, at: event.at });
      if (event.type === "assignment" && until.has(event.to)) {
        current = await sources.history.assignment(call.assignment_id);
        if (until.has(current.state)) return current;
      }
    }
  } catch (err) {
    if (signal.aborted) return undefined;
    current = await sources.history.assignment(call.assignment_id);
    if (until.has(current.state)) return current;
    throw err;
  }
  return undefined;
}
