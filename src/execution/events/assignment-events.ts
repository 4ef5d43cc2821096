import type { Logger } from "../../log/logger.js";
import type { VersionedStore } from "../../kv/versioned-store.js";
import type { AssignmentRecord } from "../model/records.js";
import type { StoreLayout } from "../model/store-layout.js";
import type { RunEventLog } from "./event-log.js";
import { assignmentEvents, type RunEvent } from "./run-events.js";

/**
 * How long the events a write left in its record wait for the record's next write before the gateway
 * that wrote them publishes them itself: a call claimed and answered within it (nearly every call
 * with an executor online) tells its creation, its claim and its outcome in one event message.
 */
export const DEFERRED_EVENTS_MS = 250;

/**
 * The run events of assignment writes (store layout 7). A tool call's creation and a claim do not
 * publish theirs: they are written into the record (`deferred_events`), and the record's next write,
 * on whichever gateway, publishes them before its own, in the same event message, and takes them off
 * in its compare-and-set. That write is usually the one applying the call's receipts, so a read with
 * a report is one event message instead of three. Every event is still published once, in order: only
 * the write that takes them off the record (its compare-and-set won) publishes them. Should no write
 * come within `flushAfterMs` (no executor claimed the call yet, the claimer died), the gateway that
 * deferred them takes them off with a compare-and-set of its own and publishes them; one that stops
 * does so first, and one that dies leaves them for the record's next write or, sooner when that is
 * far off, for the lease sweeper that finds the call's watch due (`LeaseSweeper`). Under earlier
 * layouts every write publishes its events at once (and any a layout-7 gateway left in the record
 * first).
 */
export class AssignmentEvents {
  /** The events a written record means, by the record as transformed (`transform`, then `written`). */
  private readonly due = new WeakMap<AssignmentRecord, RunEvent[]>();
  private readonly flushes = new Map<string, NodeJS.Timeout>();
  private closed = false;

  constructor(
    private readonly store: VersionedStore<AssignmentRecord>,
    private readonly log: RunEventLog,
    private readonly layout: StoreLayout,
    private readonly logger: Logger,
    private readonly flushAfterMs = DEFERRED_EVENTS_MS,
  ) {}

  /** Hooks this into `store`'s writes. */
  attach(): void {
    this.store
      .transformWrites(
        (previous, next) => this.transform(previous, next),
        // A write's decision is built without them: one that does not defer its events is written as decided.
        (stored) => (stored.deferred_events ? withoutDeferred(stored) : stored),
      )
      .observeWrites((previous, next) => this.written(previous, next));
  }

  /** The record to write instead of `next`: the events it means, with those `previous` deferred, left in it or taken off it. */
  private transform(previous: AssignmentRecord | undefined, next: AssignmentRecord): AssignmentRecord {
    // A decision is built on the record without its deferred events (the store's view): copied only when it carries some.
    const plain = next.deferred_events ? withoutDeferred(next) : next;
    const events = [...deferredOf(previous), ...assignmentEvents(previous, plain)];
    if (this.defers(previous, plain) && events.length > 0) {
      const record: AssignmentRecord = { ...plain, deferred_events: events };
      this.due.set(record, []);
      return record;
    }
    const record: AssignmentRecord = next.deferred_events ? plain : next;
    this.due.set(record, events);
    return record;
  }

  /** A creation's events and a claim's wait for the next write (layout 7). */
  private defers(previous: AssignmentRecord | undefined, next: AssignmentRecord): boolean {
    return this.layout >= 7 && !this.closed && (previous === undefined || (previous.state === "pending" && next.state === "claimed"));
  }

  /** After `next` was written: publishes what it means, or sees to the events it keeps. */
  private written(previous: AssignmentRecord | undefined, next: AssignmentRecord): void {
    if (next.deferred_events) return this.flushLater(next.assignment_id);
    // Whatever this gateway deferred of the record, this write took off and publishes.
    if (previous?.deferred_events) this.forget(next.assignment_id);
    this.log.publish(this.due.get(next) ?? [...deferredOf(previous), ...assignmentEvents(previous, next)]);
  }

  private forget(assignmentId: string): void {
    clearTimeout(this.flushes.get(assignmentId));
    this.flushes.delete(assignmentId);
  }

  private flushLater(assignmentId: string): void {
    if (this.flushes.has(assignmentId)) return;
    const timer = setTimeout(() => {
      this.flushes.delete(assignmentId);
      this.flush(assignmentId).catch((err: unknown) =>
        this.logger.warn({ err, assignment_id: assignmentId }, "deferred run events not published; the next write publishes them"),
      );
    }, this.flushAfterMs);
    timer.unref();
    this.flushes.set(assignmentId, timer);
  }

  /** Takes the events waiting in the record off it and publishes them (unless another write did). */
  async flush(assignmentId: string): Promise<void> {
    await this.store.mutate(assignmentId, (a) => (a.deferred_events ? { write: withoutDeferred(a), result: undefined } : { result: undefined }), undefined, {
      asStored: true,
    });
  }

  /** Publishes, now, what this gateway deferred and no write has published yet; defers nothing after. */
  async close(): Promise<void> {
    this.closed = true;
    const ids = [...this.flushes.keys()];
    for (const timer of this.flushes.values()) clearTimeout(timer);
    this.flushes.clear();
    await Promise.all(ids.map((id) => this.flush(id).catch(() => undefined)));
  }
}

function withoutDeferred(a: AssignmentRecord): AssignmentRecord {
  const { deferred_events: _deferred, ...rest } = a;
  return rest;
}

/** The events waiting in a record: `RunEvent`s it was given by `transform`. */
function deferredOf(a: AssignmentRecord | undefined): RunEvent[] {
  return (a?.deferred_events ?? []) as RunEvent[];
}
