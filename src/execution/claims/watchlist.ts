import type { WatchEntry } from "../model/records.js";
import type { Versioned, VersionedStore } from "../../kv/versioned-store.js";

/**
 * Removal markers one listing purges at most: a backlog (a bucket written by a version that kept
 * them) is worked off over a few sweeps instead of holding one sweep up.
 */
const MAX_PURGED_PER_LISTING = 1_000;

/** The key of a run's end watch: apart from every assignment's (keyed by its id, which has no dot). */
const runEndKey = (runId: string): string => `end.${runId}`;

/**
 * Assignments the lease sweeper must look at, and ends of runs it must finish: written *before*
 * the step that might be left half done (creating an assignment, claiming it, ending a run), so a
 * process dying right after still leaves a trace. An entry is only ever removed at the revision it
 * was read at, so a newer watch (a claim's lease) is never lost to an older one's clean-up.
 */
export class Watchlist {
  private purging: Promise<void> | undefined;
  /** An unanswered release was sent since `settled` last flushed the connection. */
  private unflushed = false;

  constructor(private readonly store: VersionedStore<WatchEntry>) {}

  /** Watch `assignmentId` from `dueAt` on; returns the revision to remove it at. */
  watch(assignmentId: string, dueAt: number): Promise<number> {
    return this.store.put(assignmentId, { assignment_id: assignmentId, due_at: dueAt });
  }

  /**
   * `watch`, unless `assignmentId` is watched already: then null, and the standing watch is left as
   * it is (it may be a claim's, due sooner). The revision to remove it at otherwise.
   */
  async watchUnlessWatched(assignmentId: string, dueAt: number): Promise<number | null> {
    const res = await this.store.create(assignmentId, { assignment_id: assignmentId, due_at: dueAt });
    return res.created ? res.revision : null;
  }

  /** Stops watching unless the watch was renewed since `revision`. */
  async unwatch(assignmentId: string, revision: number): Promise<void> {
    await this.store.removeAt(assignmentId, revision);
  }

  /** Watch the end of `runId` from `dueAt` on: a sweeper finishes it then if it is not finished; returns the revision to remove it at. */
  watchRunEnd(runId: string, dueAt: number): Promise<number> {
    return this.store.put(runEndKey(runId), { run_id: runId, due_at: dueAt });
  }

  /** Stops watching the end of `runId` unless another end of it watched it since `revision`. */
  async unwatchRunEnd(runId: string, revision: number): Promise<void> {
    await this.store.removeAt(runEndKey(runId), revision);
  }

  /**
   * Stops watching a settled assignment, whatever its watch: nothing can need one any more (a claim
   * racing the settlement fails its compare-and-set), so the watch is removed without reading it,
   * and erased rather than deleted: no removal marker is left for a later listing to purge.
   */
  async release(assignmentId: string): Promise<void> {
    await this.store.erase(assignmentId);
  }

  /**
   * `release` without a request: the purge is published with no reply subject (`eraseUnanswered`),
   * since what settled the assignment need not wait for its watch to go, nor hear that it went. One
   * the server does not carry out (a stream leader being elected) or never receives (a stop) leaves
   * the watch for a sweeper, which finds the assignment settled and drops it. `settled` waits until
   * the server has received these.
   */
  releaseUnanswered(assignmentId: string, onError: (err: unknown) => void): void {
    try {
      this.store.eraseUnanswered(assignmentId);
      this.unflushed = true;
    } catch (err) {
      onError(err);
    }
  }

  /** Every watched assignment (each claimed or running one is watched, so this is the work in flight). */
  async watchedIds(): Promise<string[]> {
    return (await this.live()).flatMap((e) => ("assignment_id" in e.value ? [e.value.assignment_id] : []));
  }

  /** Watches whose time has come, with the revision each was read at. */
  async due(now: number): Promise<Array<{ entry: WatchEntry; revision: number }>> {
    const all = await this.live();
    return all.filter((e) => e.value.due_at <= now).map((e) => ({ entry: e.value, revision: e.revision }));
  }

  /**
   * The live watches. Every settled assignment leaves its watch's removal marker behind; the markers
   * a listing comes across are purged, so that a sweep (every second, on every gateway) costs the
   * work in flight rather than every assignment ever watched. The purge runs beside the sweep, one
   * at a time: a slow or failing one (a stream leader being elected) must never hold a sweep up, and
   * what it leaves the next listing finds again.
   */
  private async live(): Promise<Array<Versioned<WatchEntry>>> {
    const { live, removed } = await this.store.list();
    if (removed.length > 0 && !this.purging) {
      this.purging = this.store
        .purgeRemoved(removed.slice(0, MAX_PURGED_PER_LISTING))
        .catch(() => undefined)
        .finally(() => (this.purging = undefined));
    }
    return live;
  }

  /** Resolves once the server has received the unanswered releases sent, and the purge of removal markers in flight has ended (tests, shutdown). */
  async settled(): Promise<void> {
    const flushing = this.unflushed ? this.store.flushed() : undefined;
    this.unflushed = false;
    await Promise.all([this.purging, flushing]);
  }
}
