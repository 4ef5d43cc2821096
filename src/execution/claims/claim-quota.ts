import { isTerminalAssignmentState } from "../model/assignment-states.js";
import type { AssignmentRecord, ClaimHoldings, HeldClaim } from "../model/records.js";
import type { Decision, Versioned, VersionedStore } from "../../kv/versioned-store.js";

/**
 * A reservation is honoured by the claim's compare-and-set only this long after it was made, and
 * counts as held for as long while its assignment is still pending at its generation: so a replica
 * reconciling the record can never drop a slot another replica is about to fill.
 */
export const RESERVATION_GRACE_MS = 10_000;

/** Attempts at creating or updating one executor's record before giving up (never expected: one executor's claims). */
const MAX_ATTEMPTS = 16;

const holdingsKey = (scope: string, executorId: string) => `${scope}.${executorId}`;
const entryKey = (e: HeldClaim) => `${e.assignment_id}:${e.generation}:${e.reserved_at}`;

/** A claim waiting for its slot, with the reservation it asks for. */
interface SlotRequest {
  readonly entry: HeldClaim;
  readonly resolve: (reserved: HeldClaim | null) => void;
  readonly reject: (err: unknown) => void;
}

/** The requests for one executor's slots not yet written, and the record as last read. */
interface SlotQueue {
  readonly requests: SlotRequest[];
  known: Versioned<ClaimHoldings> | null | undefined;
}

/**
 * The bound on in-flight claims per executor, correct across gateway replicas. Each executor has one
 * KV record of the claims it holds; a claim reserves its slot there by compare-and-set *before* the
 * assignment's own compare-and-set, so concurrent claims on any replicas cannot overshoot.
 *
 * Nothing removes an entry when its work ends (accepted -> final, lease expiry, revoke, detach, and
 * whatever edges come later): a write drops the entries whose assignments this process remembers
 * terminal, and only when the record is full are its other entries checked against their
 * assignments, and those no longer `claimed`/`running` by this executor in that generation dropped.
 * Cost on the claim path: one KV read (made together with the claim's own reads, see `read`) and one
 * compare-and-set, shared by the executor's claims that this process takes at once; at the bound,
 * also one read per held entry (in parallel), which an executor below its bound never pays.
 */
export class ClaimQuota {
  /** Per executor record: the claims of this process wait here and share one compare-and-set per batch. */
  private readonly queues = new Map<string, SlotQueue>();
  /** Per executor record: reservations of this process asked for and not yet answered (queued or being written). */
  private readonly unanswered = new Map<string, number>();

  constructor(
    private readonly holdings: VersionedStore<ClaimHoldings>,
    private readonly assignments: VersionedStore<AssignmentRecord>,
    readonly maxPerExecutor: number,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * The executor's record as this process last wrote or read it (else as it stands), to hand to
   * `reserve` (read beside the claim's other reads): a stale one only costs a retry of its compare-and-set.
   */
  read(scope: string, executorId: string): Promise<Versioned<ClaimHoldings> | null> {
    return this.holdings.recent(holdingsKey(scope, executorId));
  }

  /**
   * Reserves a slot for the claim of `assignmentId` at `generation`; null when the executor holds the
   * maximum. `current` is what `read` returned: a stale one only costs a retry of the compare-and-set.
   * An executor's claims arriving together would all contend for its one record; instead, those of
   * this process are queued and written together, one compare-and-set per batch.
   */
  reserve(scope: string, executorId: string, entry: HeldClaim, current: Versioned<ClaimHoldings> | null): Promise<HeldClaim | null> {
    const key = holdingsKey(scope, executorId);
    this.unanswered.set(key, (this.unanswered.get(key) ?? 0) + 1);
    const answered = () => {
      const left = this.unanswered.get(key)! - 1;
      if (left === 0) this.unanswered.delete(key);
      else this.unanswered.set(key, left);
    };
    return new Promise<HeldClaim | null>((resolve, reject) => {
      let queue = this.queues.get(key);
      if (!queue) {
        queue = { requests: [], known: current };
        this.queues.set(key, queue);
        void this.drain(key, scope, executorId, queue);
      }
      queue.requests.push({ entry, resolve, reject });
    }).finally(answered);
  }

  /**
   * Whether the executor's record as `read` returned it, less the entries whose claims this process
   * knows ended, has a slot left for one more claim beyond those this process is already writing. A
   * guess on a value that may be stale: it only lets a claim write its slot and its compare-and-set
   * together (`ClaimService`), whose slot is still decided by the record's own compare-and-set.
   */
  likelyRoom(scope: string, executorId: string, current: Versioned<ClaimHoldings> | null): boolean {
    const key = holdingsKey(scope, executorId);
    const record = this.holdings.remembered(key) ?? current?.value;
    const held = record ? record.held.filter((e) => !this.knownEnded(e)).length : 0;
    return held + (this.unanswered.get(key) ?? 0) < this.maxPerExecutor;
  }

  /**
   * An entry whose assignment this process remembers terminal: its claim is over for good (a terminal
   * state is final), so the entry is dropped whenever the record is written, not only once it is full.
   * That keeps the record about as long as the executor's claims in flight instead of at its bound.
   */
  private knownEnded(e: HeldClaim): boolean {
    const a = this.assignments.remembered(e.assignment_id);
    return a !== undefined && isTerminalAssignmentState(a.state);
  }

  /** Writes the queued reservations of one record, batch after batch, until none is left. */
  private async drain(key: string, scope: string, executorId: string, queue: SlotQueue): Promise<void> {
    // Let the claims of this turn of the event loop join the first batch.
    await Promise.resolve();
    while (queue.requests.length > 0) {
      const batch = queue.requests.splice(0);
      try {
        const reserved = await this.reserveAll(
          key,
          scope,
          executorId,
          batch.map((r) => r.entry),
          queue.known,
        );
        for (const r of batch) r.resolve(reserved.has(r.entry) ? r.entry : null);
      } catch (err) {
        for (const r of batch) r.reject(err);
      }
      // Claims that came meanwhile start from what this batch wrote, as remembered (a stale record
      // only costs a retry of its compare-and-set): read from the server, it cost each batch after the
      // first a request and the decoding of the whole record. A failed read leaves it to the batch's own.
      queue.known = queue.requests.length > 0 ? await this.holdings.recent(key).catch(() => undefined) : undefined;
    }
    // No await since the last check: no request can have joined in between.
    this.queues.delete(key);
  }

  /** One batch: the entries that got a slot (in order of arrival while there is room). */
  private async reserveAll(
    key: string,
    scope: string,
    executorId: string,
    asked: readonly HeldClaim[],
    current: Versioned<ClaimHoldings> | null | undefined,
  ): Promise<Set<HeldClaim>> {
    // A second claim of the same assignment replaces the first reservation: one slot per assignment.
    const askedIds = new Set(asked.map((e) => e.assignment_id));
    const ended = new Set<string>();
    // Set once a check of the record found nothing more to drop: then what fits is all there is.
    let checked = false;
    const decide = (cur: ClaimHoldings): Decision<ClaimHoldings, { admitted: HeldClaim[]; held: HeldClaim[] }> => {
      const held = cur.held.filter((e) => !askedIds.has(e.assignment_id) && !ended.has(entryKey(e)) && !this.knownEnded(e));
      const admitted = asked.slice(0, Math.max(0, this.maxPerExecutor - held.length));
      // Not room for all: first see whether claims that ended make room (below).
      if (admitted.length === 0 || (admitted.length < asked.length && !checked)) return { result: { admitted: [], held } };
      return { write: { ...cur, held: [...held, ...admitted] }, result: { admitted, held } };
    };
    // undefined: not known, read it; null: known to be missing, create it.
    let known = current;
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      if (known === null) {
        const first = asked.slice(0, this.maxPerExecutor);
        const created = await this.holdings.create(key, { executor_id: executorId, scope, held: first });
        if (created.created) return new Set(first);
        known = undefined;
        continue;
      }
      const res = await this.holdings.mutate(key, decide, known);
      known = res === null ? null : undefined;
      if (res === null) continue;
      if (res.written || checked) return new Set(res.result.admitted);
      // Full: drop the entries whose claims ended and try again. Other claims of the executor (other
      // replicas) fill the record meanwhile, so it is checked afresh each time.
      const newlyEnded = await this.ended(executorId, res.result.held);
      if (newlyEnded.size === 0) checked = true;
      for (const k of newlyEnded) ended.add(k);
    }
    return new Set();
  }

  /** The entries whose claims no longer hold: checked against their assignments, all read at once. */
  private async ended(executorId: string, held: readonly HeldClaim[]): Promise<Set<string>> {
    const now = this.now();
    // A remembered terminal state is final, whatever its generation: only the others are read afresh.
    const found = await Promise.all(held.map((e) => this.assignments.recent(e.assignment_id, (a) => isTerminalAssignmentState(a.state))));
    const ended = new Set<string>();
    held.forEach((e, i) => {
      const a = found[i]?.value;
      const holds =
        a !== undefined && (a.state === "claimed" || a.state === "running") && a.claim?.executor_id === executorId && a.claim.generation === e.generation;
      // Still pending at its generation: the claim may be in flight on another replica. Anything else
      // (claimed by another, a later generation, ended) can never become this reservation's claim.
      const inFlight = a !== undefined && a.state === "pending" && a.generation === e.generation && reservationValid(e, now);
      if (!holds && !inFlight) ended.add(entryKey(e));
    });
    return ended;
  }
}

/** Whether a reservation may still be turned into a claim (see {@link RESERVATION_GRACE_MS}). */
export function reservationValid(reservation: HeldClaim, now: number): boolean {
  return now - reservation.reserved_at < RESERVATION_GRACE_MS;
}
