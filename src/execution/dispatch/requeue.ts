import { nextAssignmentState } from "../model/assignment-states.js";
import { replacing } from "../receipts/receipt-index.js";
import type { AssignmentRecord } from "../model/records.js";

/** Earlier claims kept per assignment (to tell a stale token from a forged one). */
const PAST_CLAIMS_KEPT = 16;

/** The edges that send an assignment back to the candidates. */
export type RequeueEvent = "expire_lease" | "release" | "retry_read";

/**
 * The assignment offered again after `event` (lease expired, executor detached before `accepted`,
 * a safe read retried): next generation, no claim (the old one kept among the past claims, so its
 * late receipts are told apart from forged ones), no candidate yet. Undefined when the table has
 * no such edge from the current state.
 */
export function requeued(a: AssignmentRecord, event: RequeueEvent, now: number): AssignmentRecord | undefined {
  const to = nextAssignmentState(a.state, event);
  if (!to || !a.claim) return undefined;
  const past_claims = [...a.past_claims, a.claim].slice(-PAST_CLAIMS_KEPT);
  // A retried read's `accepted` stays answerable (its executor may resend it): kept among the replaced receipts.
  return {
    ...a,
    state: to,
    generation: a.generation + 1,
    claim: null,
    past_claims,
    accepted: null,
    ...replacing(a, a.accepted),
    candidate_seq: null,
    updated_at: now,
  };
}
