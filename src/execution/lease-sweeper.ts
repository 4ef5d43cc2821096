import type { Logger } from "../log/logger.js";
import { nextAssignmentState } from "./assignment-states.js";
import type { CandidateQueue } from "./candidate-queue.js";
import type { Dispatcher } from "./dispatcher.js";
import type { AssignmentRecord } from "./records.js";
import type { VersionedStore } from "./versioned-store.js";
import type { Watchlist } from "./watchlist.js";

/** Earlier claims kept per assignment (to tell a stale token from a forged one). */
const PAST_CLAIMS_KEPT = 16;

/**
 * Every gateway runs one: at each tick it looks at the due watches and expires unconfirmed claims
 * past their lease (back to the candidates with generation + 1) and finishes creations a crash left
 * undispatched. There is no timer per assignment that dies with its process, and concurrent sweepers
 * are safe: each step is a compare-and-set or idempotent.
 */
export class LeaseSweeper {
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;

  constructor(
    private readonly assignments: VersionedStore<AssignmentRecord>,
    private readonly watchlist: Watchlist,
    private readonly dispatcher: Dispatcher,
    private readonly candidates: CandidateQueue,
    private readonly log: Logger,
    private readonly intervalMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  start(): void {
    this.timer = setInterval(() => {
      // One sweep at a time per process; a slow one simply skips ticks.
      this.running ??= this.sweepOnce()
        .catch((err: unknown) => this.log.error({ err }, "lease sweep failed"))
        .finally(() => (this.running = undefined));
    }, this.intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }

  async sweepOnce(): Promise<void> {
    for (const { entry, revision } of await this.watchlist.due(this.now())) {
      const settled = await this.settle(entry.assignment_id);
      if (settled) await this.watchlist.unwatch(entry.assignment_id, revision);
    }
  }

  /** Brings one watched assignment forward; true when it needs no more watching. */
  private async settle(assignmentId: string): Promise<boolean> {
    const expired = await this.assignments.mutate(assignmentId, (a) => {
      if (a.state !== "claimed" || !a.claim || a.claim.lease_expires_at > this.now()) return { result: false };
      const to = nextAssignmentState(a.state, "expire_lease")!;
      const past_claims = [...a.past_claims, a.claim].slice(-PAST_CLAIMS_KEPT);
      return { write: { ...a, state: to, generation: a.generation + 1, claim: null, past_claims, candidate_seq: null, updated_at: this.now() }, result: true };
    });
    if (!expired) return true;
    if (expired.result) this.log.info({ assignment_id: assignmentId, generation: expired.value.generation }, "unconfirmed claim expired; back to the candidates");
    const a = expired.value;
    if (a.state === "claimed") {
      // Not yet expired (the watch was older than the lease): watch again at the lease's end.
      await this.watchlist.watch(assignmentId, a.claim!.lease_expires_at);
      return false;
    }
    if (a.state === "pending" && a.candidate_seq !== null && !expired.result) return this.reofferIfTaken(a);
    if (a.state === "pending") await this.dispatcher.dispatch(assignmentId);
    return true;
  }

  /**
   * A pending assignment whose candidate an executor took but never claimed would wait forever:
   * offer it again with the next generation. One still waiting in the stream is simply watched again.
   */
  private async reofferIfTaken(a: AssignmentRecord): Promise<boolean> {
    if (await this.candidates.waiting(a.candidate_seq!)) {
      await this.dispatcher.rewatch(a.assignment_id);
      return false;
    }
    const res = await this.assignments.mutate(a.assignment_id, (cur) => {
      const to = nextAssignmentState(cur.state, "reoffer");
      if (!to || cur.generation !== a.generation || cur.candidate_seq !== a.candidate_seq) return { result: false };
      return { write: { ...cur, state: to, generation: cur.generation + 1, candidate_seq: null, updated_at: this.now() }, result: true };
    });
    if (res?.result) this.log.warn({ assignment_id: a.assignment_id, generation: res.value.generation }, "candidate taken but never claimed; offered again");
    await this.dispatcher.dispatch(a.assignment_id);
    return true;
  }
}
