import type { ProgressEntry, ReceiptIndexEntry } from "../model/records.js";
import { progressIndexEntry } from "./receipt-index.js";
import type { VersionedStore } from "../../kv/versioned-store.js";
import type { Receipt } from "../../wire/messages.js";
import { isClaimReceiptId, progressIdPlace } from "../../wire/receipt-ids.js";
import type { StoreLayout } from "../model/store-layout.js";

type ProgressReceipt = Extract<Receipt, { kind: "progress" }>;

/**
 * Progress of running assignments, one create-only entry per `<assignment>.<seq>`. Receipts may be
 * processed out of order (several gateways share one consumer), so the order is the `seq`, not the
 * arrival: gaps are allowed (a lost report never blocks a final result) and a late lower seq still
 * fills its place. The same seq from another receipt is a conflict.
 */
export class ProgressStore {
  constructor(
    private readonly store: VersionedStore<ProgressEntry>,
    /** From 3 on, an entry stands as its receipt's index entry where it can be found from the id alone. */
    private readonly layout: StoreLayout,
  ) {}

  /**
   * The entry of progress receipt `r`, of the claim of `generation`. Under layout 3 it also holds
   * what the receipt index would (`indexed`) when the receipt's id is the readable one `receiptId`
   * binds to that claim: only the claim's holder can mint it, and it names this entry's key.
   */
  entryOf(r: ProgressReceipt, generation: number, stored: { body_digest: string; stream_seq: number; at: number }): ProgressEntry {
    const entry: ProgressEntry = { assignment_id: r.assignment_id, seq: r.seq, receipt_id: r.receipt_id, progress: r.progress, at: stored.at };
    const place = progressIdPlace(r.receipt_id);
    const findable = place?.assignment_id === r.assignment_id && place.seq === r.seq && isClaimReceiptId(r, generation);
    if (this.layout < 3 || !findable) return entry;
    return { ...entry, indexed: { executor_id: r.executor_id, body_digest: stored.body_digest, stream_seq: stored.stream_seq } };
  }

  /** Writes the entry once; returns the one that stands (an earlier writer's, if any) and whether this write made it. */
  async record(entry: ProgressEntry): Promise<{ created: boolean; standing: ProgressEntry }> {
    const res = await this.store.create(progressKey(entry), entry);
    return res.created ? { created: true, standing: entry } : { created: false, standing: res.existing.value };
  }

  /** All progress of an assignment, by seq. */
  async list(assignmentId: string): Promise<ProgressEntry[]> {
    const entries = await this.store.entries(`${assignmentId}.*`);
    return entries.map((e) => e.value).sort((a, b) => a.seq - b.seq);
  }

  /**
   * The receipt index's entry of `receiptId` where a progress entry stands as one (store layout 3):
   * an id of the readable claim-bound form names the only key its entry can be under.
   */
  async indexEntry(receiptId: string): Promise<ReceiptIndexEntry | null> {
    const place = progressIdPlace(receiptId);
    if (!place) return null;
    const stored = (await this.store.get(progressKey(place)))?.value;
    return stored?.receipt_id === receiptId ? progressIndexEntry(stored) : null;
  }
}

function progressKey(place: { assignment_id: string; seq: number }): string {
  return `${place.assignment_id}.${place.seq}`;
}
