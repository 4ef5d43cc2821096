import type { AssignmentRecord, ClaimHoldings, HeldClaim } from "./records.js";
import type { Decision, Versioned, VersionedStore } from "./versioned-store.js";

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

/**
 * The bound on in-flight claims per executor, correct across gateway replicas. Each executor has one
 * KV record of the claims it holds; a claim reserves its slot there by compare-and-set *before* the
 * assignment's own compare-and-set, so concurrent claims on any replicas cannot overshoot.
 *
 * Nothing removes an entry when its work ends (accepted -> final, lease expiry, revoke, detach, and
 * whatever edges come later): only when the record is full are its entries checked against their
 * assignments, and those no longer `claimed`/`running` by this executor in that generation dropped.
 * Cost on the claim path: one KV read (made together with the claim's own reads, see `read`) and one
 * compare-and-set; at the bound, also one read per held entry (in parallel), which an executor below
 * its bound never pays.
 */
export class ClaimQuota {
  constructor(
    private readonly holdings: VersionedStore<ClaimHoldings>,
    private readonly assignments: VersionedStore<AssignmentRecord>,
    readonly maxPerExecutor: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** The executor's record as it stands, to hand to `reserve` (read beside the claim's other reads). */
  read(scope: string, executorId: string): Promise<Versioned<ClaimHoldings> | null> {
    return this.holdings.get(holdingsKey(scope, executorId));
  }

  /**
   * Reserves a slot for the claim of `assignmentId` at `generation`; null when the executor holds the
   * maximum. `current` is what `read` returned: a stale one only costs a retry of the compare-and-set.
   */
  async reserve(scope: string, executorId: string, assignmentId: string, generation: number, current: Versioned<ClaimHoldings> | null): Promise<HeldClaim | null> {
    const key = holdingsKey(scope, executorId);
    const entry: HeldClaim = { assignment_id: assignmentId, generation, reserved_at: this.now() };
    const ended = new Set<string>();
    const decide = (cur: ClaimHoldings): Decision<ClaimHoldings, "full" | "reserved"> => {
      // A second claim of the same assignment replaces the first reservation: one slot per assignment.
      const held = cur.held.filter((e) => e.assignment_id !== assignmentId && !ended.has(entryKey(e)));
      if (held.length >= this.maxPerExecutor) return { result: "full" };
      return { write: { ...cur, held: [...held, entry] }, result: "reserved" };
    };
    // undefined: not known, read it; null: known to be missing, create it.
    let known: Versioned<ClaimHoldings> | null | undefined = current;
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      if (known === null) {
        const created = await this.holdings.create(key, { executor_id: executorId, scope, held: [entry] });
        if (created.created) return entry;
        known = undefined;
        continue;
      }
      const res: { result: "full" | "reserved"; value: ClaimHoldings } | null = await this.holdings.mutate(key, decide, known);
      known = res === null ? null : undefined;
      if (res === null) continue;
      if (res.result === "reserved") return entry;
      // Full: drop the entries whose claims ended and try again. Other claims of the executor fill the
      // record meanwhile, so it is checked again each time; full of live claims only is a refusal.
      const newlyEnded = await this.ended(executorId, res.value.held.filter((e) => !ended.has(entryKey(e))));
      if (newlyEnded.size === 0) return null;
      for (const key of newlyEnded) ended.add(key);
    }
    return null;
  }

  /** The entries whose claims no longer hold: checked against their assignments, all read at once. */
  private async ended(executorId: string, held: readonly HeldClaim[]): Promise<Set<string>> {
    const now = this.now();
    const found = await Promise.all(held.map((e) => this.assignments.get(e.assignment_id)));
    const ended = new Set<string>();
    held.forEach((e, i) => {
      const a = found[i]?.value;
      const holds = a !== undefined && (a.state === "claimed" || a.state === "running") && a.claim?.executor_id === executorId && a.claim.generation === e.generation;
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
