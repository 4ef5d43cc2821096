import type { Grant, ReceiptKind, ReceiptStatus } from "../wire/messages.js";
import type { Phase } from "./phases.js";

/**
 * The runner's durable memory. Everything the runner must not forget across a crash goes through
 * this interface, so a product can back it with its own database; `SqliteRunnerStore` is the default.
 *
 * Contract for an implementation:
 * - Every method but `recordAnswer`, `createAssignment` of a read's claim, and `appendReceipt` of a
 *   claim's first progress report or of a read's outcome saved ahead of its confirmation, is durable
 *   when its promise resolves (committed, not merely buffered): the runner publishes to the gateway,
 *   or calls a handler, only after the write that must precede it has resolved.
 * - Those four need only be visible to this store's later reads when they resolve, provided writes
 *   become durable in the order they were made (so every durable write after them makes them
 *   durable too). Making them durable at once is always allowed; a read's outcome must become
 *   durable soon after without waiting for a later write (a runner that only serves reads makes none).
 *   - `recordAnswer`: an answer lost to a power failure only makes a restart resend its receipt,
 *     which the gateway answers `duplicate` or from its receipt index.
 *   - `createAssignment` of a read's claim (phase `accepting`, grant `tool_kind` `read`,
 *     `isReadClaim`): one lost so (its `accepted` may have been sent) is missing from the runner's
 *     held-claims report at the next start, and the gateway detaches it: a read has no side
 *     effects, and only a write's claim must be durable before its `accepted` goes out.
 *   - `appendReceipt` of progress seq 1 (`isFirstProgress`): one lost so may have reached the
 *     gateway. A restarted runner whose store holds no progress of a claim numbers that claim's
 *     progress from 2 (`nextProgressSeq`), so the lost report's id is never sent with another body.
 *   - `appendReceipt` of a final receipt saved while the claim is `accepting` (`isReadAheadOutcome`:
 *     a read that ran ahead of its confirmation): one lost so may have reached the gateway. A read
 *     found in the store at start-up runs again, and its outcome takes an id of its own
 *     (`receiptId`'s `rerun`), so the lost one's id is never sent with another body either.
 *     Every other report and final receipt is durable before it is sent, and makes them durable.
 * - Each method is one atomic transaction (a receipt and the phase change that goes with it land
 *   together or not at all).
 * - Writes are applied in the order they are called, each seeing the ones called before it: a read
 *   runs while its claim is being saved, so its progress and outcome can be appended before the
 *   claim's `createAssignment` has resolved (the runner sends them only after it has).
 * - A write that fails leaves the writes called after it free to fail or succeed on their own.
 * - Phase changes are compare-and-set: `change.from` must be the stored phase, otherwise the
 *   method throws `PhaseConflictError` and changes nothing.
 * - A store file/schema belongs to one executor id and one process at a time (`open` refuses another
 *   executor id).
 */
export interface RunnerStore {
  /** Prepares the store for `executorId`; throws when it already belongs to another executor. */
  open(executorId: string): Promise<void>;
  /** Saves a new local assignment together with its first outbox receipts (in order); a read's claim need not be durable yet. */
  createAssignment(assignment: LocalAssignment, receipts: readonly OutboxReceipt[]): Promise<void>;
  /** Appends a receipt to the outbox (and changes the phase, when given); a claim's first progress report, or a read's outcome saved ahead of its confirmation, need not be durable yet. */
  appendReceipt(receipt: OutboxReceipt, change?: PhaseChange): Promise<void>;
  /** Records the gateway's answer to a saved receipt (and changes the phase, when given); durable by the next durable write. */
  recordAnswer(receiptId: string, answer: StoredAnswer, change?: PhaseChange): Promise<void>;
  /** Changes a local assignment's phase. */
  setPhase(key: AssignmentKey, change: PhaseChange): Promise<void>;
  /** The latest claim (highest generation) of an assignment held by this executor. */
  getAssignment(assignmentId: string): Promise<LocalAssignment | undefined>;
  /**
   * Every local assignment a start-up resumes, oldest first: those whose phase is not final, and
   * those in a final phase with a receipt still unanswered (a read refused while what it saved
   * behind `accepted` was on its way: every saved receipt is sent until answered).
   */
  listOpen(): Promise<LocalAssignment[]>;
  /** The receipts of one claim, in the order they were appended. */
  listReceipts(key: AssignmentKey): Promise<OutboxReceipt[]>;
  /**
   * Deletes up to `limit` claims that reached a final phase (`settled`, `refused`) before `before`
   * (ms), oldest first, with their receipts; resolves with how many it deleted. Nothing is ever read
   * of a final claim again but for inspection (`runner.assignment`), so this only bounds the store's
   * size (`retainSettledMs`). Optional: a store without it keeps every claim. Need not be durable.
   */
  pruneSettled?(before: number, limit: number): Promise<number>;
  close(): Promise<void>;
}

/** One claim of one assignment: an assignment returned to the candidates is claimed again with a higher generation. */
export interface AssignmentKey {
  assignmentId: string;
  generation: number;
}

export interface PhaseChange {
  from: Phase;
  to: Phase;
}

export interface LocalAssignment extends AssignmentKey {
  /** The grant as received (validated), claim token included: receipts are resent with it after a restart. */
  grant: Grant;
  phase: Phase;
  createdAt: number;
  updatedAt: number;
}

/** A receipt's body: the receipt without its transport fields (`claim_token`, `replayed`). */
export type ReceiptBody = { receipt_id: string; assignment_id: string; executor_id: string; kind: ReceiptKind } & Record<string, unknown>;

/** A receipt in the outbox. `body` must come back exactly as saved (as a JSON value). */
export interface OutboxReceipt extends AssignmentKey {
  receiptId: string;
  kind: ReceiptKind;
  body: ReceiptBody;
  savedAt: number;
  /** Absent until the gateway answered. */
  answer?: StoredAnswer;
}

export interface StoredAnswer {
  status: Exclude<ReceiptStatus, "pending">;
  code?: string;
  reason?: string;
  answeredAt: number;
}

export class PhaseConflictError extends Error {
  override readonly name = "PhaseConflictError";
  constructor(key: AssignmentKey, expected: Phase, actual: Phase | undefined) {
    super(`assignment ${key.assignmentId} (generation ${key.generation}) is ${actual ?? "unknown"}, expected ${expected}`);
  }
}

/**
 * A read's claim on its way to `accepted`: the one `createAssignment` that need not be durable when
 * it resolves (see `RunnerStore`). A refusal is a final receipt and a write's claim precedes side
 * effects: both are durable first.
 */
export function isReadClaim(assignment: LocalAssignment): boolean {
  return assignment.phase === "accepting" && assignment.grant.tool_kind === "read";
}

/**
 * A claim's first progress report: the one `appendReceipt` that need not be durable when it resolves
 * (see `RunnerStore`), so that it leaves without waiting for an fsync (the final receipt's, or the
 * next report's, covers it).
 */
export function isFirstProgress(receipt: OutboxReceipt): boolean {
  return receipt.kind === "progress" && receipt.body.seq === 1;
}

/**
 * A final receipt saved while its claim is still `accepting`: only a read that ran ahead of its
 * confirmation reports from there. The one final receipt `appendReceipt` need not make durable
 * before it resolves (see `RunnerStore`): it leaves with `accepted` instead of waiting for an fsync.
 * A read confirmed first (slower than `accepted`'s answer) saves its outcome durably, as a write does.
 */
export function isReadAheadOutcome(change: PhaseChange | undefined): boolean {
  return change?.from === "accepting" && change.to === "reporting";
}

/**
 * The seq a claim's next progress report takes, after the reports `saved` holds. `restarted`: the
 * claim was found in the store at start-up, where a first report (saved without an fsync) may be
 * missing yet have reached the gateway; with none saved, numbering starts at 2.
 */
export function nextProgressSeq(saved: readonly OutboxReceipt[], restarted: boolean): number {
  // The highest seq, not the count: numbering may have skipped 1.
  const highest = Math.max(0, ...saved.flatMap((r) => (r.kind === "progress" ? [Number(r.body.seq)] : [])));
  return highest === 0 && restarted ? 2 : highest + 1;
}
