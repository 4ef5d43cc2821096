import type { Logger } from "../../log/logger.js";
import { nextAssignmentState } from "../model/assignment-states.js";
import type { CandidateQueue } from "../dispatch/candidate-queue.js";
import type { ExecutorDetacher } from "../operations/executor-detach.js";
import type { Dispatcher } from "../dispatch/dispatcher.js";
import type { PresenceService } from "./presence.js";
import type { AssignmentRecord, AssignmentWatch, RunEndWatch, RunRecord } from "../model/records.js";
import { runIsOpen } from "../model/run-states.js";
import { requeued } from "../dispatch/requeue.js";
import type { VersionedStore } from "../../kv/versioned-store.js";
import type { Watchlist } from "./watchlist.js";
import type { BackgroundTasks } from "../tasks/background-tasks.js";
import type { AssignmentEvents } from "../events/assignment-events.js";

/**
 * How long past its time a watch is kept whose step never showed: a creation whose assignment never
 * appeared, a run's end never recorded (the request that wrote it died first, or is merely slow).
 */
const UNSEEN_STEP_KEPT_MS = 60_000;

/** What the sweeper asks of the runs: to finish an end whose process died (`RunService.finishEnd`). */
export interface RunEnds {
  finishEnd(runId: string): Promise<RunRecord | null>;
}

/**
 * Every gateway runs one: at each tick it looks at the due watches and expires unconfirmed claims
 * past their lease (back to the candidates with generation + 1), finishes creations a crash left
 * undispatched, detaches confirmed work whose executor's presence lapsed, finishes runs' ends
 * whose process died, and publishes run events a dead gateway left waiting in a record. There is no
 * timer per assignment that dies with its process, and concurrent sweepers are safe: each step is a
 * compare-and-set or idempotent.
 */
export class LeaseSweeper {
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;

  constructor(
    private readonly assignments: VersionedStore<AssignmentRecord>,
    private readonly watchlist: Watchlist,
    private readonly dispatcher: Dispatcher,
    private readonly candidates: CandidateQueue,
    private readonly presence: PresenceService,
    private readonly detacher: ExecutorDetacher,
    private readonly tasks: BackgroundTasks,
    private readonly runEnds: RunEnds,
    private readonly deferredEvents: Pick<AssignmentEvents, "flush">,
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
      if ("run_id" in entry) {
        if (await this.finishRunEnd(entry)) await this.watchlist.unwatchRunEnd(entry.run_id, revision);
      } else if (await this.settle(entry)) await this.watchlist.unwatch(entry.assignment_id, revision);
    }
  }

  /** Finishes a run's end its process left half done; true when it needs no more watching. */
  private async finishRunEnd(entry: RunEndWatch): Promise<boolean> {
    const run = await this.runEnds.finishEnd(entry.run_id);
    return !run || !runIsOpen(run) || this.now() - entry.due_at >= UNSEEN_STEP_KEPT_MS;
  }

  /** Brings one watched assignment forward; true when it needs no more watching. */
  private async settle(entry: AssignmentWatch): Promise<boolean> {
    const assignmentId = entry.assignment_id;
    const expired = await this.assignments.mutate(assignmentId, (a) => {
      const next = a.claim && a.claim.lease_expires_at <= this.now() ? requeued(a, "expire_lease", this.now()) : undefined;
      return next ? { write: next, result: true } : { result: false };
    });
    // No assignment (yet): the creation that wrote the watch died, or is still writing it. Its watch
    // is the only one the assignment will have until its first claim relies on it, so it is kept a
    // while past its time rather than removed under a creation that is merely slow.
    if (!expired) return this.now() - entry.due_at >= UNSEEN_STEP_KEPT_MS;
    // Run events a creation or a claim left in the record for a write that has not come (its gateway
    // died before publishing them itself): told now, not at the call's next step, which may be far off.
    if (!expired.written && expired.value.deferred_events) await this.deferredEvents.flush(assignmentId);
    if (expired.result)
      this.log.info({ assignment_id: assignmentId, generation: expired.value.generation }, "unconfirmed claim expired; back to the candidates");
    const a = expired.value;
    if (a.state === "claimed") {
      // Not yet expired (the watch was older than the lease): watch again at the lease's end.
      await this.watchlist.watch(assignmentId, a.claim!.lease_expires_at);
      return false;
    }
    // Not leased, not tied to its executor's presence: a submitted task has its own deadline.
    if (a.task) return this.tasks.checkDeadline(a);
    if (a.state === "running") return this.checkHolder(a);
    // Pending at its generation: offered (its candidate waits, or was taken and never claimed), or a
    // creation that died before offering it; either way it is offered again unless its candidate waits.
    if (a.state === "pending" && !expired.result) return this.reofferIfTaken(a);
    if (a.state === "pending") await this.dispatcher.dispatch(assignmentId);
    return true;
  }

  /** Confirmed work whose executor is still present is looked at again later; otherwise it is detached. */
  private async checkHolder(a: AssignmentRecord): Promise<boolean> {
    const holder = a.claim!.executor_id;
    if (await this.presence.present(a.scope, holder)) {
      await this.watchlist.watch(a.assignment_id, this.now() + this.presence.ttlMs);
      return false;
    }
    const outcome = await this.detacher.detachOne(a, holder, "gone");
    if (outcome) this.log.warn({ assignment_id: a.assignment_id, executor_id: holder, outcome }, "executor presence lapsed with confirmed work; detached");
    return true;
  }

  /**
   * A pending assignment whose candidate an executor took but never claimed, or whose candidate the
   * server will never deliver again, would wait forever: offer it again with the next generation.
   * One still waiting in the stream is simply watched again.
   */
  private async reofferIfTaken(a: AssignmentRecord): Promise<boolean> {
    if (await this.candidates.waiting(a, a.generation)) {
      await this.dispatcher.rewatch(a.assignment_id);
      return false;
    }
    const res = await this.assignments.mutate(a.assignment_id, (cur) => {
      const to = nextAssignmentState(cur.state, "reoffer");
      if (!to || cur.generation !== a.generation) return { result: false };
      return { write: { ...cur, state: to, generation: cur.generation + 1, candidate_seq: null, updated_at: this.now() }, result: true };
    });
    if (res?.result) this.log.warn({ assignment_id: a.assignment_id, generation: res.value.generation }, "candidate taken but never claimed; offered again");
    await this.dispatcher.dispatch(a.assignment_id);
    return true;
  }
}
