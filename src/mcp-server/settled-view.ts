import type { AssignmentView, HistoryReader } from "../execution/runs/history.js";

/** States a tool call's MCP answer waits for: it has an outcome, or needs an operator (never reported as success). */
const ANSWERED = new Set<AssignmentView["state"]>(["completed", "failed", "cancelled", "reconciliation_required", "withdrawn", "revoked", "abandoned"]);

const FIRST_POLL_MS = 20;
const MAX_POLL_MS = 500;

/**
 * Reads the assignment until it is settled and resolves with it; resolves undefined once `signal`
 * aborts. Each new progress entry is handed to `onProgress` in order. Polling the record (not the
 * run's event stream) keeps the wait independent of how long the run's history already is.
 */
export async function settledView(
  history: HistoryReader,
  assignmentId: string,
  signal: AbortSignal,
  onProgress: (entry: AssignmentView["progress"][number]) => void,
): Promise<AssignmentView | undefined> {
  let seen = 0;
  let wait = FIRST_POLL_MS;
  while (!signal.aborted) {
    const view = await history.assignment(assignmentId);
    for (const entry of view.progress) if (entry.seq > seen) (seen = entry.seq), onProgress(entry);
    if (ANSWERED.has(view.state)) return view;
    await new Promise<void>((done) => {
      const timer = setTimeout(finish, wait);
      signal.addEventListener("abort", finish, { once: true });
      function finish() {
        clearTimeout(timer);
        signal.removeEventListener("abort", finish);
        done();
      }
    });
    wait = Math.min(wait * 2, MAX_POLL_MS);
  }
  return undefined;
}
