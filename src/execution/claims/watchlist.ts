import { WatchEntry } from "../model/records.js";
import type { StoreLayout } from "../model/store-layout.js";
import type { BucketRole } from "../../kv/buckets.js";
import type { Versioned, VersionedStore } from "../../kv/versioned-store.js";
import { ASSIGNMENT_BUCKET_WATCH_PREFIX } from "../../streams/names.js";

/**
 * Removal markers one listing purges at most: a backlog (a bucket written by a version that kept
 * them) is worked off over a few sweeps instead of holding one sweep up.
 */
const MAX_PURGED_PER_LISTING = 1_000;

/**
 * Watches not yet due that one listing moves from the other place to this gateway's at most
 * (`Watchlist`); due ones are all moved. While gateways of both layouts run (a rolling change of
 * it), each moves the other's watches back, so this bounds what that costs them per sweep.
 */
const MAX_MOVED_AHEAD_PER_LISTING = 100;

/**
 * Where watches are kept: a bucket, and the prefix of their keys in it. The watch bucket holds
 * nothing else (no prefix); the assignments bucket holds them beside the assignments (store layout
 * 6: `ASSIGNMENT_BUCKET_WATCH_PREFIX`), in the same stream, so that a watch published right before
 * its assignment on one connection is stored before it.
 */
export interface WatchPlace {
  readonly store: VersionedStore<WatchEntry>;
  readonly prefix: string;
}

/**
 * Assignments the lease sweeper must look at, and ends of runs it must finish: written *before*
 * the step that might be left half done (creating an assignment, claiming it, ending a run), so a
 * process dying right after still leaves a trace. An entry is only ever removed at the revision it
 * was read at, so a newer watch (a claim's lease) is never lost to an older one's clean-up.
 *
 * Watches are written to `place`, and read in `place` and in `other`, the place another store layout
 * writes them to: a listing moves what it finds there here (created here unless a watch of the key
 * is here already, then removed there at the revision it was read at), every due one and a few of
 * the others. So a cluster whose gateways change their store layout, in either direction, keeps
 * every watch looked after, and ends with all of them in its layout's place.
 */
export class Watchlist {
  private readonly purging = new Map<WatchPlace, Promise<void>>();
  /** An unanswered release was sent since `settled` last flushed the connection. */
  private unflushed = false;

  constructor(
    private readonly place: WatchPlace,
    private readonly other?: WatchPlace,
  ) {}

  /** Whether watches are kept in the assignments' own stream: a creation then need not wait for its watch's reply before writing the assignment. */
  get besideAssignments(): boolean {
    return this.place.prefix === ASSIGNMENT_BUCKET_WATCH_PREFIX;
  }

  /** Watch `assignmentId` from `dueAt` on; returns the revision to remove it at. */
  watch(assignmentId: string, dueAt: number): Promise<number> {
    return this.place.store.put(assignmentKey(this.place, assignmentId), { assignment_id: assignmentId, due_at: dueAt });
  }

  /**
   * `watch`, unless `assignmentId` is watched already: then null, and the standing watch is left as
   * it is (it may be a claim's, due sooner). The revision to remove it at otherwise. Published
   * before this returns (nothing is awaited first), so a write the caller starts after it leaves
   * on the connection after it.
   */
  async watchUnlessWatched(assignmentId: string, dueAt: number): Promise<number | null> {
    const res = await this.place.store.create(assignmentKey(this.place, assignmentId), { assignment_id: assignmentId, due_at: dueAt });
    return res.created ? res.revision : null;
  }

  /** Stops watching unless the watch was renewed since `revision`. */
  async unwatch(assignmentId: string, revision: number): Promise<void> {
    await this.place.store.removeAt(assignmentKey(this.place, assignmentId), revision);
  }

  /** Watch the end of `runId` from `dueAt` on: a sweeper finishes it then if it is not finished; returns the revision to remove it at. */
  watchRunEnd(runId: string, dueAt: number): Promise<number> {
    return this.place.store.put(runEndKey(this.place, runId), { run_id: runId, due_at: dueAt });
  }

  /** Stops watching the end of `runId` unless another end of it watched it since `revision`. */
  async unwatchRunEnd(runId: string, revision: number): Promise<void> {
    await this.place.store.removeAt(runEndKey(this.place, runId), revision);
  }

  /**
   * Stops watching a settled assignment, whatever its watch: nothing can need one any more (a claim
   * racing the settlement fails its compare-and-set), so the watch is removed without reading it,
   * and erased rather than deleted: no removal marker is left for a later listing to purge.
   */
  async release(assignmentId: string): Promise<void> {
    await this.place.store.erase(assignmentKey(this.place, assignmentId));
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
      this.place.store.eraseUnanswered(assignmentKey(this.place, assignmentId));
      this.unflushed = true;
    } catch (err) {
      onError(err);
    }
  }

  /** Every watched assignment, in either place (each claimed or running one is watched, so this is the work in flight). */
  async watchedIds(): Promise<string[]> {
    const ids = (await this.live(Date.now())).flatMap((e) => ("assignment_id" in e.value ? [e.value.assignment_id] : []));
    return [...new Set(ids)];
  }

  /** Watches whose time has come, with the revision each was read at (in this gateway's place: those of the other are moved first). */
  async due(now: number): Promise<Array<{ entry: WatchEntry; revision: number }>> {
    const all = await this.live(now);
    return all.filter((e) => e.here && e.value.due_at <= now).map((e) => ({ entry: e.value, revision: e.revision }));
  }

  /**
   * The live watches of both places, those of the other place due at `now` (and a few more) moved
   * here first. `here`: in this gateway's place, where it removes and renews them.
   */
  private async live(now: number): Promise<Array<Versioned<WatchEntry> & { here: boolean }>> {
    const [here, there] = await Promise.all([this.listed(this.place), this.other ? this.listed(this.other) : []]);
    const kept = new Map<string, Versioned<WatchEntry> & { here: boolean }>(
      here.map((e) => [watchKey(this.place, e.value), { value: e.value, revision: e.revision, here: true }]),
    );
    if (there.length === 0 || !this.other) return [...kept.values()];
    const other = this.other;
    let ahead = 0;
    const left: Array<Versioned<WatchEntry> & { here: boolean }> = [];
    for (const e of there) {
      if (e.value.due_at > now && ahead++ >= MAX_MOVED_AHEAD_PER_LISTING) {
        left.push({ value: e.value, revision: e.revision, here: false });
        continue;
      }
      const key = watchKey(this.place, e.value);
      if (!kept.has(key)) {
        const res = await this.place.store.create(key, e.value);
        kept.set(key, { ...(res.created ? { value: e.value, revision: res.revision } : res.existing), here: true });
      }
      // What is here stands for it: written here, it is the later watch.
      await other.store.removeAt(e.key, e.revision);
    }
    return [...kept.values(), ...left];
  }

  /**
   * The live watches of `place`. Every settled assignment leaves its watch's removal marker behind;
   * the markers a listing comes across are purged, so that a sweep (every second, on every gateway)
   * costs the work in flight rather than every assignment ever watched. The purge runs beside the
   * sweep, one at a time per place: a slow or failing one (a stream leader being elected) must never
   * hold a sweep up, and what it leaves the next listing finds again.
   */
  private async listed(place: WatchPlace): Promise<Array<Versioned<WatchEntry> & { key: string }>> {
    const { live, removed } = await place.store.list(`${place.prefix}>`);
    if (removed.length > 0 && !this.purging.has(place)) {
      this.purging.set(
        place,
        place.store
          .purgeRemoved(removed.slice(0, MAX_PURGED_PER_LISTING))
          .catch(() => undefined)
          .finally(() => this.purging.delete(place)),
      );
    }
    return live;
  }

  /** Resolves once the server has received the unanswered releases sent, and the purges of removal markers in flight have ended (tests, shutdown). */
  async settled(): Promise<void> {
    const flushing = this.unflushed ? this.place.store.flushed() : undefined;
    this.unflushed = false;
    await Promise.all([...this.purging.values(), flushing]);
  }
}

/**
 * The watchlist of a gateway writing store layout `layout`: from 6 on its watches are keys of the
 * assignments bucket, before 6 entries of the watch bucket; it reads both.
 */
export async function openWatchlist(
  store: (role: BucketRole, schema: typeof WatchEntry) => Promise<VersionedStore<WatchEntry>>,
  layout: StoreLayout,
): Promise<Watchlist> {
  const bucket: WatchPlace = { store: await store("watch", WatchEntry), prefix: "" };
  const assignments: WatchPlace = { store: await store("assignments", WatchEntry), prefix: ASSIGNMENT_BUCKET_WATCH_PREFIX };
  return layout >= 6 ? new Watchlist(assignments, bucket) : new Watchlist(bucket, assignments);
}

/** An assignment's watch key in `place`. */
function assignmentKey(place: WatchPlace, assignmentId: string): string {
  return `${place.prefix}${assignmentId}`;
}

/** The key of a run's end watch in `place`: apart from every assignment's (keyed by its id, which has no dot). */
function runEndKey(place: WatchPlace, runId: string): string {
  return `${place.prefix}end.${runId}`;
}

/** The key `entry` has in `place`. */
function watchKey(place: WatchPlace, entry: WatchEntry): string {
  return "run_id" in entry ? runEndKey(place, entry.run_id) : assignmentKey(place, entry.assignment_id);
}
