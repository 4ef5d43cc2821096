import { setTimeout } from "node:timers/promises";
import { DeliverPolicy, type JetStreamClient, type JetStreamManager } from "@nats-io/jetstream";
import type { KV } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import type { z } from "zod";
import { isRevisionCheckUnavailable, isRevisionConflict } from "../nats/jetstream-codes.js";
import { kvStreamName } from "../streams/names.js";
import { STORED_MAX_JSON_DEPTH } from "../validation/json-depth.js";
import { decode, encode } from "../wire/codec.js";
import { forEachConcurrently } from "./concurrently.js";
import { RevisionCache } from "./revision-cache.js";
import { WatchedBucket } from "./watched-bucket.js";

/** A stored value and the KV revision it was read at. */
export interface Versioned<T> {
  readonly value: T;
  readonly revision: number;
}

/** A value as `recent` found it: `cached` when it came from this process's memory, so possibly stale. */
export type Recent<T> = Versioned<T> & { readonly cached: boolean };

/**
 * What a `mutate` decider returns: a new value to write, or no write; `result` is handed back either
 * way. `encoded` is the value's encoding when the decider made it already (to measure the record):
 * then it is written as it is instead of being encoded a second time.
 */
export type Decision<T, R> = { write: T; encoded?: Uint8Array; result: R } | { write?: undefined; encoded?: undefined; result: R };

/**
 * A compare-and-set to decide again: another writer got there first (also what `create` of an
 * existing key says), or the server could not check the revision yet and wrote nothing.
 */
const mustRetry = (err: unknown): boolean => isRevisionConflict(err) || isRevisionCheckUnavailable(err);

/** Raised when a key stays contended past every retry (never expected; a bug or a storm). */
export class ContentionError extends Error {
  override readonly name = "ContentionError";
}

/**
 * One KV bucket of msgpack records validated by a zod schema, where every change is a
 * compare-and-set on the revision the decision was made from. A conflicting write re-reads and
 * re-decides, so concurrent gateways (and concurrent requests in one) can never lose an update.
 */
/** What listing and purging a bucket needs besides the KV handle: its name, the connection and the JetStream APIs. */
export interface BucketAccess {
  readonly bucket: string;
  readonly nc: NatsConnection;
  readonly js: JetStreamClient;
  readonly jsm: JetStreamManager;
}

/** Bound on waiting for the last entries of a listing (an entry may expire between counting and reading). */
const LIST_WAIT_MS = 2_000;

/** Purge requests in flight at once when dropping removal markers. */
const PURGE_CONCURRENCY = 16;

/** What a listing of a bucket found: its live entries, and the keys whose last message removed them. */
export interface Listing<T> {
  live: Array<Versioned<T> & { key: string }>;
  removed: Array<{ key: string; revision: number }>;
}

/** Told of every successful `create` (no previous value) and every written `mutate`: metrics, run events. */
export type WriteObserver<T> = (previous: T | undefined, next: T) => void;

/** Makes the value a `create` (no previous value) or `mutate` writes out of the one asked for: what every write of the store adds or takes off. */
export type WriteTransform<T> = (previous: T | undefined, next: T) => T;

export class VersionedStore<T> {
  private readonly observers: WriteObserver<T>[] = [];
  private transform: WriteTransform<T> | undefined;
  private decisionView: ((stored: T) => T) | undefined;
  private cache: RevisionCache<T> | undefined;

  constructor(
    private readonly kv: KV,
    private readonly schema: z.ZodType<T>,
    private readonly access: BucketAccess,
    private readonly maxAttempts = 64,
  ) {}

  /**
   * Adds an observer of this store's compare-and-set writes (`put` is not observed), called
   * synchronously after each write: what is derived here no write site can forget. Must not throw.
   */
  observeWrites(observer: WriteObserver<T>): this {
    this.observers.push(observer);
    return this;
  }

  /**
   * Every value `create` and `mutate` write goes through `transform` first (the value written, cached,
   * observed and returned is its result). It must be pure: a `mutate` may run it several times. One
   * that returns the value it was given keeps the caller's encoding of it. `view`: what a `mutate`'s
   * decision is given of the stored value, the fields only `transform` handles taken off (so that a
   * decision built on it, not carrying them, is written as it is, with its encoding).
   */
  transformWrites(transform: WriteTransform<T>, view?: (stored: T) => T): this {
    this.transform = transform;
    this.decisionView = view;
    return this;
  }

  /** `value` as `create` writes it (transformed): for a caller that encodes it first, to pass both to `create`. */
  prepareCreate(value: T): T {
    return this.transform ? this.transform(undefined, value) : value;
  }

  /**
   * Keeps the last value this process wrote or read of up to `capacity` keys, for `recent`: the
   * gateway that just wrote a record (created an assignment, claimed it) reads it next from memory,
   * not from the server.
   */
  withRevisionCache(capacity: number): this {
    this.cache = new RevisionCache(capacity);
    return this;
  }

  /** The value as it stands on the server. */
  async get(key: string): Promise<Versioned<T> | null> {
    const entry = await this.kv.get(key);
    if (!entry || entry.operation !== "PUT") {
      this.cache?.forget(key);
      return null;
    }
    const read = { value: this.decodeValue(entry.value), revision: entry.revision };
    this.cache?.store(key, read);
    return read;
  }

  /**
   * The whole bucket as this process's view, kept current by a watch on `nc` (the KV handle's
   * connection), its values decoded as `get` decodes them: see `WatchedBucket`.
   */
  view(nc: NatsConnection): Promise<WatchedBucket<T>> {
    return WatchedBucket.start(nc, this.kv, (data) => this.decodeValue(data));
  }

  /**
   * The value this process last wrote or read (`cached`), else a fresh read. A cached value can be
   * stale: hand it to `mutate` as `known` (a stale revision fails the compare-and-set, which then
   * reads again), and let `trust` say which remembered values may be acted on: any other is read
   * afresh (see `confirm`), so nothing is refused or decided on a stale one.
   */
  async recent(key: string, trust?: (value: T) => boolean): Promise<Recent<T> | null> {
    const kept = this.cache?.get(key);
    if (kept) return trust ? this.confirm(key, { ...kept, cached: true }, trust) : { ...kept, cached: true };
    const read = await this.get(key);
    return read && { ...read, cached: false };
  }

  /** The value this process last wrote or read, without any request (undefined when none is kept); as stale as `recent`'s. */
  remembered(key: string): T | undefined {
    return this.cache?.get(key)?.value;
  }

  /** `entry` as `recent` gave it, read afresh when it was remembered and `trust` does not take it. */
  async confirm(key: string, entry: Recent<T> | null, trust: (value: T) => boolean): Promise<Recent<T> | null> {
    if (!entry?.cached || trust(entry.value)) return entry;
    const read = await this.get(key);
    return read && { ...read, cached: false };
  }

  /** Unconditional write, for values with one writer (presence) or where the last writer may win (watches). */
  async put(key: string, value: T): Promise<number> {
    const revision = await this.kv.put(key, encode(value));
    this.cache?.store(key, { value, revision });
    return revision;
  }

  /**
   * Removes `key` whatever its revision and leaves nothing behind: its messages are purged from the
   * bucket's stream, so no delete marker stays for listings to deliver and purge later (one request
   * instead of a delete now and a purge at the next listing). Nothing to remove is no error.
   */
  async erase(key: string): Promise<void> {
    this.cache?.forget(key);
    await this.access.jsm.streams.purge(kvStreamName(this.access.bucket), { filter: this.subjectOf(key) });
  }

  /**
   * `erase`, published with no reply subject: the server carries the purge out and answers nobody, so
   * it costs one message instead of a request, its answer and the promise and timer waiting for it.
   * Nothing says whether it was done: for a removal that may be lost (a sweeper finds what is left).
   * Throws only on a closed connection. `flushed` tells when the server has received it.
   */
  eraseUnanswered(key: string): void {
    this.cache?.forget(key);
    const { nc, js, bucket } = this.access;
    nc.publish(`${js.apiPrefix}.STREAM.PURGE.${kvStreamName(bucket)}`, JSON.stringify({ filter: this.subjectOf(key) }));
  }

  /** Resolves once the server has received every message this store's connection sent before (a ping answered). */
  flushed(): Promise<void> {
    return this.access.nc.flush();
  }

  private subjectOf(key: string): string {
    return `$KV.${this.access.bucket}.${key}`;
  }

  /** Deletes `key` only if it is still at `revision`; false when someone wrote it since. */
  async removeAt(key: string, revision: number): Promise<boolean> {
    for (let attempt = 0; attempt < this.maxAttempts; attempt++) {
      try {
        await this.kv.delete(key, { previousSeq: revision });
        this.cache?.forget(key);
        return true;
      } catch (err) {
        if (isRevisionConflict(err)) return false;
        if (!isRevisionCheckUnavailable(err)) throw err;
      }
    }
    throw new ContentionError(`delete of ${key} could not be checked against revision ${revision}`);
  }

  /** Every live entry whose key matches `filter`, in one pass (see `list`). */
  async entries(filter = ">"): Promise<Array<Versioned<T> & { key: string }>> {
    return (await this.list(filter)).live;
  }

  /**
   * The keys matching `filter`, in one pass: the live entries, and the removed keys, whose last
   * message is a delete or purge marker. (`kv.keys()` of the client can stall for its full timeout
   * on a bucket written to concurrently; this counts the subjects first, then reads exactly that
   * many last-per-subject messages.)
   */
  async list(filter = ">"): Promise<Listing<T>> {
    const prefix = `$KV.${this.access.bucket}.`;
    const info = await this.access.jsm.streams.info(kvStreamName(this.access.bucket), { subjects_filter: prefix + filter });
    const count = Object.keys(info.state.subjects ?? {}).length;
    const listing: Listing<T> = { live: [], removed: [] };
    if (count === 0) return listing;
    const consumer = await this.access.js.consumers.get(kvStreamName(this.access.bucket), {
      filter_subjects: prefix + filter,
      deliver_policy: DeliverPolicy.LastPerSubject,
    });
    const batch = await consumer.fetch({ max_messages: count, expires: LIST_WAIT_MS });
    for await (const m of batch) {
      const op = m.headers?.get("KV-Operation");
      const key = m.subject.slice(prefix.length);
      if (op === "DEL" || op === "PURGE") listing.removed.push({ key, revision: m.seq });
      else listing.live.push({ key, value: this.decodeValue(m.data), revision: m.seq });
      if (m.info.pending === 0) break;
    }
    await consumer.delete().catch(() => undefined);
    return listing;
  }

  /**
   * Drops the markers of removed keys from the bucket's stream. A marker stays a key's last message
   * for good (it is what `history: 1` keeps), so every later listing would deliver it again and the
   * stream would keep one per key ever removed. Each key's messages are purged only up to its
   * marker's own revision: a value written to the key since (a higher revision) stays.
   */
  async purgeRemoved(removed: ReadonlyArray<{ key: string; revision: number }>): Promise<void> {
    const stream = kvStreamName(this.access.bucket);
    await forEachConcurrently(removed, PURGE_CONCURRENCY, async ({ key, revision }) => {
      await this.access.jsm.streams.purge(stream, { filter: this.subjectOf(key), seq: revision + 1 });
    });
  }

  /**
   * Creates `key` unless it exists; then returns what is there instead. `prepared`: the value as
   * `prepareCreate` made it, and its encoding, when the caller made them already.
   */
  async create(key: string, asked: T, prepared?: Uint8Array): Promise<{ created: true; revision: number } | { created: false; existing: Versioned<T> }> {
    const value = prepared ? asked : this.prepareCreate(asked);
    const encoded = prepared ?? encode(value);
    for (let attempt = 0; attempt < this.maxAttempts; attempt++) {
      try {
        const revision = await this.kv.create(key, encoded);
        this.cache?.store(key, { value, revision });
        for (const observe of this.observers) observe(undefined, value);
        return { created: true, revision };
      } catch (err) {
        if (!mustRetry(err)) throw err;
      }
      const existing = await this.get(key);
      if (existing) return { created: false, existing };
      // A deleted key: `create` succeeds on the next attempt.
    }
    throw new ContentionError(`create of ${key} kept conflicting`);
  }

  /**
   * Reads `key`, asks `decide` what to do with the current value and writes its answer with a
   * compare-and-set; on a conflicting revision, reads again and asks again. `decide` must be pure
   * (it may run several times). Returns null when the key does not exist. `known`, a value the
   * caller read or wrote itself, saves the first read: if it is stale the compare-and-set fails
   * and the loop reads the current value, so it can never decide on an outdated one.
   */
  async mutate<R>(
    key: string,
    decide: (current: T) => Decision<T, R>,
    known?: Versioned<T>,
    { asStored = false }: { asStored?: boolean } = {},
  ): Promise<{ result: R; value: T; written: boolean; revision: number } | null> {
    for (let attempt = 0; attempt < this.maxAttempts; attempt++) {
      const current = attempt === 0 && known ? known : await this.get(key);
      if (!current) return null;
      // `asStored`: the decision is the transform's own, and sees what it handles.
      const decision = decide(this.decisionView && !asStored ? this.decisionView(current.value) : current.value);
      if (decision.write === undefined) {
        // A decision not to write made on a value we did not read is confirmed on a fresh read.
        if (current === known && attempt === 0) continue;
        return { result: decision.result, value: current.value, written: false, revision: current.revision };
      }
      const write = this.transform ? this.transform(current.value, decision.write) : decision.write;
      try {
        const revision = await this.kv.update(key, (write === decision.write && decision.encoded) || encode(write), current.revision);
        this.cache?.store(key, { value: write, revision });
        for (const observe of this.observers) observe(current.value, write);
        return { result: decision.result, value: write, written: true, revision };
      } catch (err) {
        if (!mustRetry(err)) throw err;
      }
      // Under a storm of writers on one key (many tool calls appended to one run), jitter spreads the retries.
      if (attempt > 2) await setTimeout(Math.random() * Math.min(attempt, 25));
    }
    throw new ContentionError(`update of ${key} kept conflicting`);
  }

  private decodeValue(data: Uint8Array): T {
    return decode(this.schema, data, STORED_MAX_JSON_DEPTH);
  }
}
