import { setTimeout as sleep } from "node:timers/promises";
import type { NatsConnection, QueuedIterator } from "@nats-io/transport-node";
import type { StreamState } from "@nats-io/jetstream";
import type { KV, KvWatchEntry } from "@nats-io/kv";
import type { Versioned } from "./versioned-store.js";

/** A key as the view holds it: its stored bytes until a read decodes them, or (an own removal) gone after `revision`. */
type Kept<T> = { readonly revision: number; readonly removed: true } | { readonly revision: number; readonly removed: false; data?: Uint8Array; value?: T };

/** While the view is behind, how often the bucket's stream is asked whether the watch has caught up all the same (see `probe`). */
const PROBE_MS = 1_000;

/** While the view is caught up, how often the watchdog asks where the bucket's stream ends (see `watchdog`). */
const WATCHDOG_MS = 5_000;

/** Bounds of the wait before watching again after a watch could not be made or ended by itself. */
const REWATCH_MIN_MS = 100;
const REWATCH_MAX_MS = 5_000;

/**
 * A whole KV bucket as this process's view: `key -> { revision, value }`, kept current by a watch
 * (the current values first, then every change; a delete or purge removes the key, while a stream
 * purge, `VersionedStore.erase`, leaves no message to deliver: not for a watched bucket). The owner hands
 * it its own writes (`wrote`, `removed`), so a write this process made is in its view at once; a
 * revision is never replaced by an older one arriving later on the watch. Values are decoded once
 * per revision, at their first read.
 *
 * `get` answers only from a view that has caught up: with the values the bucket held when the view
 * started (`ready`), and after a lost connection with every change made meanwhile. Messages the
 * server sent while the connection was down are lost to the watch, and the client's ordered consumer
 * notices the gap only at the next message of the bucket, which may be long in coming: so at every
 * reconnect the view watches again from the last revision it was delivered, and `get` waits until
 * that watch has caught up. A watch whose consumer is lost while the connection stays up (its node
 * gone, in a cluster) is noticed by the client only after two missed idle heartbeats, 60 to 90 s: a
 * watchdog notices it within `WATCHDOG_MS` to twice that, and watches again.
 */
export class WatchedBucket<T> {
  private readonly entries = new Map<string, Kept<T>>();
  /** The last revision the watch delivered: a new watch resumes after it, and an own write at or below it is in the view already (or superseded). */
  private delivered = 0;
  private watch: QueuedIterator<KvWatchEntry> | undefined;
  /** Watches made so far; only one made after the view fell behind can catch it up. */
  private watches = 0;
  /** The current watch has caught up once it delivers this revision (the stream's last when `probe` asked). */
  private target = Infinity;
  private behind: { since: number; caughtUp: Promise<void>; resolve: () => void } | undefined;
  /** Watches in a row that could not be made or ended by themselves: the pause before the next grows with them. */
  private failures = 0;
  /** Set when `rewatch` ends the current watch, so the next is made at once. */
  private restarting = false;
  private reconnects = 0;
  private stopped = false;
  /** Resolves once the values the bucket held when the view started are in. */
  readonly ready: Promise<void>;

  private constructor(
    private readonly nc: NatsConnection,
    private readonly kv: KV,
    private readonly decode: (data: Uint8Array) => T,
  ) {
    this.fallBehind();
    this.ready = this.behind!.caughtUp;
  }

  /** Starts the view of `kv`'s bucket on `nc` (its connection); resolves once the watch is made (await `ready` for its values). */
  static async start<T>(nc: NatsConnection, kv: KV, decode: (data: Uint8Array) => T): Promise<WatchedBucket<T>> {
    const view = new WatchedBucket(nc, kv, decode);
    view.watch = await kv.watch();
    void view.follow();
    void view.followConnection();
    void view.watchdog();
    return view;
  }

  /** The key's value and revision as the view has them; waits while the view is behind. */
  async get(key: string): Promise<Versioned<T> | undefined> {
    if (this.behind) await this.behind.caughtUp;
    if (this.stopped) throw new Error("the bucket's view is stopped");
    const kept = this.entries.get(key);
    if (!kept || kept.removed) return undefined;
    if (kept.data) {
      kept.value = this.decode(kept.data);
      delete kept.data;
    }
    return { value: kept.value!, revision: kept.revision };
  }

  /** This process wrote `value` at `revision`. */
  wrote(key: string, revision: number, value: T): void {
    const kept = this.entries.get(key);
    if (revision <= this.delivered || (kept && kept.revision >= revision)) return;
    this.entries.set(key, { revision, removed: false, value });
  }

  /** This process removed the key's value of revision `after` (a removal's own revision is not known to the client). */
  removed(key: string, after: number): void {
    const kept = this.entries.get(key);
    if (kept ? kept.revision > after : after <= this.delivered) return;
    this.entries.set(key, { revision: after, removed: true });
  }

  stop(): void {
    this.stopped = true;
    this.watch?.stop();
    this.behind?.resolve();
  }

  /** Takes the watches' entries, one watch after another, until stopped. */
  private async follow(): Promise<void> {
    while (!this.stopped) {
      if (this.watch) {
        await this.take(this.watch);
        this.watch = undefined;
        if (this.stopped) return;
        this.fallBehind();
        // Ended by `rewatch`: watched again at once; ended by itself: after a pause, longer each time until one catches up.
        if (this.restarting) this.restarting = false;
        else this.failures++;
      }
      if (this.nc.isClosed()) return this.stop();
      if (this.failures > 0) await sleep(Math.min(REWATCH_MIN_MS * 2 ** (this.failures - 1), REWATCH_MAX_MS), undefined, { ref: false });
      const reconnects = this.reconnects;
      // Everything after the last revision delivered, in order: every change made meanwhile.
      const next = await this.kv.watch({ resumeFromRevision: this.delivered + 1 }).catch(() => undefined);
      if (!next) this.failures++;
      // One made across a reconnect may have missed messages as the previous one did: made again.
      else if (this.stopped || reconnects !== this.reconnects) next.stop();
      else this.watch = next;
    }
  }

  private async take(watch: QueuedIterator<KvWatchEntry>): Promise<void> {
    const watchNo = ++this.watches;
    this.target = Infinity;
    void this.probe(watchNo);
    try {
      for await (const entry of watch) {
        this.delivered = entry.revision;
        const kept = this.entries.get(entry.key);
        if (!kept || kept.revision < entry.revision) {
          if (entry.operation === "PUT") this.entries.set(entry.key, { revision: entry.revision, removed: false, data: entry.value });
          else this.entries.delete(entry.key);
        }
        // Nothing left to deliver. (`isUpdate` cannot say it: the client counts the watch's pending
        // messages when it makes the watch, so the last current value is already flagged an update, an
        // empty bucket delivers nothing to flag, and a counted message expired before delivery shifts it.)
        if (entry.delta === 0 || entry.revision >= this.target) this.caughtUp(watchNo);
      }
    } catch {
      // The watch failed: the next one resumes where this one stopped.
    }
  }

  /**
   * Asks the bucket's stream where it ends, for a watch that has not caught up yet: the watch has
   * caught up once it delivered that revision, or at once when the bucket is empty (no entry will
   * come to say so). Asked again while behind: the messages counted can expire or be purged before
   * they are delivered.
   */
  private async probe(watchNo: number): Promise<void> {
    while (!this.stopped && this.behind && this.watches === watchNo) {
      const state = await this.streamState();
      if (this.watches !== watchNo) return;
      if (state && (state.messages === 0 || state.last_seq <= this.delivered)) return this.caughtUp(watchNo);
      if (state) this.target = Math.min(this.target, state.last_seq);
      await sleep(PROBE_MS, undefined, { ref: false });
    }
  }

  private async followConnection(): Promise<void> {
    for await (const status of this.nc.status()) {
      if (this.stopped) return;
      if (status.type === "disconnect") this.fallBehind();
      else if (status.type === "reconnect") {
        this.reconnects++;
        this.rewatch();
      }
    }
  }

  /**
   * While the view is caught up, asks every `WATCHDOG_MS` where the bucket's stream ends: a watch
   * still short of where it ended a look earlier has stalled (a watch delivers within milliseconds).
   */
  private async watchdog(): Promise<void> {
    let mark: number | undefined;
    while (!this.stopped) {
      await sleep(WATCHDOG_MS, undefined, { ref: false });
      const watchNo = this.watches;
      const state = this.behind ? undefined : await this.streamState();
      if (!state || this.behind || this.watches !== watchNo) mark = undefined;
      else if (mark !== undefined && this.delivered < mark) {
        mark = undefined;
        this.rewatch();
      } else mark = state.messages > 0 ? state.last_seq : undefined;
    }
  }

  /** Ends the current watch for the next to resume after its last revision; `get` waits meanwhile. */
  private rewatch(): void {
    this.fallBehind();
    if (this.watch) {
      this.restarting = true;
      this.watch.stop();
    }
  }

  /** Where the bucket's stream stands; undefined when it cannot be asked now (asked again later). */
  private streamState(): Promise<StreamState | undefined> {
    return this.kv.status().then(
      ({ streamInfo }) => streamInfo.state,
      () => undefined,
    );
  }

  /** From now on `get` waits for a watch made after this moment to catch up. */
  private fallBehind(): void {
    if (!this.behind) {
      let resolve!: () => void;
      const caughtUp = new Promise<void>((r) => (resolve = r));
      this.behind = { since: this.watches, caughtUp, resolve };
    }
    this.behind.since = this.watches;
  }

  private caughtUp(watchNo: number): void {
    if (!this.behind || watchNo <= this.behind.since) return;
    this.behind.resolve();
    this.behind = undefined;
    this.failures = 0;
  }
}
