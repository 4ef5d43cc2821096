import type { WatchEntry } from "./records.js";
import type { VersionedStore } from "./versioned-store.js";

/**
 * Assignments the lease sweeper must look at: written *before* the step that might be left half
 * done (creating an assignment, claiming it), so a process dying right after still leaves a trace.
 * An entry is only ever removed at the revision it was read at, so a newer watch (a claim's lease)
 * is never lost to an older one's clean-up.
 */
export class Watchlist {
  constructor(private readonly store: VersionedStore<WatchEntry>) {}

  /** Watch `assignmentId` from `dueAt` on; returns the revision to remove it at. */
  watch(assignmentId: string, dueAt: number): Promise<number> {
    return this.store.put(assignmentId, { assignment_id: assignmentId, due_at: dueAt });
  }

  /** Stops watching unless the watch was renewed since `revision`. */
  async unwatch(assignmentId: string, revision: number): Promise<void> {
    await this.store.removeAt(assignmentId, revision);
  }

  /** Stops watching when the watch is still the one set for `dueAt` (a confirmed claim's lease watch). */
  async release(assignmentId: string, dueAt: number): Promise<void> {
    const got = await this.store.get(assignmentId);
    if (got && got.value.due_at === dueAt) await this.store.removeAt(assignmentId, got.revision);
  }

  /** Watches whose time has come, with the revision each was read at. */
  async due(now: number): Promise<Array<{ entry: WatchEntry; revision: number }>> {
    const all = await this.store.entries();
    return all.filter((e) => e.value.due_at <= now).map((e) => ({ entry: e.value, revision: e.revision }));
  }
}
