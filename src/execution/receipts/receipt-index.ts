import type { ReceiptAnswer, ReceiptQuery, ReceiptQueryReply } from "../../wire/messages.js";
import type { AppliedReceipt, AssignmentRecord, ProgressEntry, ReceiptIndexEntry } from "../model/records.js";
import type { VersionedStore } from "../../kv/versioned-store.js";
import type { ProgressStore } from "./progress-store.js";

/**
 * The permanent receipt index, `receipt_id` -> body digest and the answer given. The stream's
 * de-duplication window is minutes; this is forever, so a resend long after still gets the same
 * answer, and the same id with another body is a conflict. A receipt an assignment's compare-and-set
 * applied has no entry of its own: the assignment record already holds its id and digest
 * (`appliedEntries`), which saves a write and a round trip per applied receipt; nor, under store
 * layout 3, has a progress receipt under its claim-bound id: its progress entry is its index entry;
 * under 4 its assignment's compare-and-set applies it, as it does `accepted`.
 */
export class ReceiptIndex {
  constructor(
    private readonly store: VersionedStore<ReceiptIndexEntry>,
    private readonly assignments: VersionedStore<AssignmentRecord>,
    /** Where a progress receipt under its claim-bound id is indexed by its own entry (store layout 3). */
    private readonly progress: ProgressStore,
  ) {}

  async get(receiptId: string): Promise<ReceiptIndexEntry | null> {
    const [indexed, progress] = await Promise.all([this.store.get(receiptId), this.progress.indexEntry(receiptId)]);
    return indexed?.value ?? progress;
  }

  /** Writes the entry once; returns the one that stands (an earlier writer's, if any). */
  async record(entry: ReceiptIndexEntry): Promise<ReceiptIndexEntry> {
    const res = await this.store.create(entry.receipt_id, entry);
    return res.created ? entry : res.existing.value;
  }

  /**
   * `tg.rq.<scope>.<executor>`: the stored answer for an executor whose answer got lost, `pending`
   * while unseen. Another body under the stored id is `receipt_conflict` (a resend the stream dropped
   * as a duplicate never reached a gateway: this is where the sender learns it). A receipt another
   * executor's claim or another assignment stored is `not_yours`, with nothing of it told.
   */
  async answerQuery(query: ReceiptQuery): Promise<ReceiptQueryReply> {
    const [indexed, found] = await Promise.all([this.get(query.receipt_id), this.assignments.get(query.assignment_id)]);
    const known = indexed ?? (found && appliedEntry(found.value, query.receipt_id));
    const ids = { receipt_id: query.receipt_id, assignment_id: query.assignment_id, kind: query.kind };
    if (!known) return { ...ids, status: "pending" };
    if (known.assignment_id !== query.assignment_id || known.executor_id !== query.executor_id)
      return {
        status: "refused",
        code: "not_yours",
        reason: `receipt '${query.receipt_id}' is not one of this executor's receipts for assignment '${query.assignment_id}'`,
      };
    if (known.body_digest !== query.body_digest)
      return {
        ...ids,
        status: "rejected",
        code: "receipt_conflict",
        reason: `receipt '${query.receipt_id}' was stored with another body; the body asked about was never stored`,
      };
    return storedAnswer(known);
  }
}

/** The answer a stored receipt stands for (an index entry, or one its assignment applied). */
export function storedAnswer(entry: ReceiptIndexEntry): ReceiptAnswer {
  return {
    receipt_id: entry.receipt_id,
    assignment_id: entry.assignment_id,
    kind: entry.kind,
    status: entry.status,
    ...(entry.code ? { code: entry.code } : {}),
    ...(entry.reason ? { reason: entry.reason } : {}),
  };
}

/**
 * The receipts an assignment's compare-and-sets applied, as the index entries they stand for:
 * `accepted` and an executor's `final` (both applied under the current claim), those a later
 * edge replaced, and the progress reports its record carries (store layout 4). An operator's
 * settlement is no executor's receipt and stands for no entry.
 */
export function appliedEntries(a: AssignmentRecord): ReceiptIndexEntry[] {
  const holder = a.claim?.executor_id;
  const current = [a.accepted, a.settled_by ? null : a.final].flatMap((applied) => (applied && holder ? [{ ...applied, executor_id: holder }] : []));
  const applied = [...current, ...(a.replaced ?? [])].map((e) => ({ ...e, assignment_id: a.assignment_id, status: "recorded" as const }));
  return [...applied, ...(a.progress_log ?? []).flatMap((p) => progressIndexEntry(p) ?? [])];
}

/** The index entry of `receiptId` if the assignment applied it. */
export function appliedEntry(a: AssignmentRecord, receiptId: string): ReceiptIndexEntry | null {
  return appliedEntries(a).find((e) => e.receipt_id === receiptId) ?? null;
}

/** For an edge that takes `applied` (the assignment's `accepted` or `final`) off the record: keep it among `replaced`, so the assignment still answers for it. */
export function replacing(a: AssignmentRecord, applied: AppliedReceipt | null): Pick<AssignmentRecord, "replaced"> {
  return applied && a.claim ? { replaced: [...(a.replaced ?? []), { ...applied, executor_id: a.claim.executor_id }] } : {};
}

/** The index entry a progress entry stands for, if it stands for one (`indexed`): its receipt, recorded. */
export function progressIndexEntry(p: ProgressEntry): ReceiptIndexEntry | null {
  if (!p.indexed) return null;
  const { executor_id, body_digest, stream_seq } = p.indexed;
  return { receipt_id: p.receipt_id, assignment_id: p.assignment_id, executor_id, kind: "progress", body_digest, status: "recorded", stream_seq, at: p.at };
}
