import type { AssignmentRecord, ProgressEntry, ReceiptIndexEntry } from "../model/records.js";
import { encode } from "../../wire/codec.js";
import { progressIndexEntry } from "./receipt-index.js";
import type { VersionedStore } from "../../kv/versioned-store.js";
import type { Receipt } from "../../wire/messages.js";
import { isClaimReceiptId, progressIdPlace } from "../../wire/receipt-ids.js";
import type { StoreLayout } from "../model/store-layout.js";

type ProgressReceipt = Extract<Receipt, { kind: "progress" }>;

/** What a stored report keeps of its receipt's storing: the body's digest, its place in the receipts stream, when. */
export interface StoredReport {
  body_digest: string;
  stream_seq: number;
  at: number;
}

/**
 * Reports one assignment record carries at most, and the largest it carries (encoded): the record
 * must still fit in one message beside its arguments, claims, receipts and projection (the creation
 * leaves 64 KiB of room for those).
 */
const MAX_CARRIED_REPORTS = 16;
const MAX_CARRIED_REPORT_BYTES = 1_024;

/**
 * Progress of running assignments, one report per `<assignment>.<seq>`: carried by the assignment's
 * record (store layout 4, while it has room), else a create-only entry of the progress bucket. Receipts may be
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
   * The entry `a`'s compare-and-set appends to its record for progress receipt `r` (store layout 4):
   * always its receipt's index entry too, since every lookup of a receipt reads the assignment it
   * names. Null when the report goes to the bucket instead (`entryOf`): an earlier layout, a record
   * whose reports went there since one did not fit, one that carries MAX_CARRIED_REPORTS already, or
   * a large report.
   */
  carriedEntry(a: AssignmentRecord, r: ProgressReceipt, stored: StoredReport): ProgressEntry | null {
    if (this.layout < 4 || a.progress_in_bucket || (a.progress_log?.length ?? 0) >= MAX_CARRIED_REPORTS) return null;
    const entry: ProgressEntry = { ...reportOf(r, stored), indexed: indexFacts(r, stored) };
    return encode(entry).byteLength <= MAX_CARRIED_REPORT_BYTES ? entry : null;
  }

  /** Whether this layout records progress by a compare-and-set of the assignment (which may still send a report to the bucket). */
  get carriedByRecords(): boolean {
    return this.layout >= 4;
  }

  /**
   * The bucket entry of progress receipt `r`, of the claim of `generation`. Under layout 3 it also holds
   * what the receipt index would (`indexed`) when the receipt's id is the readable one `receiptId`
   * binds to that claim: only the claim's holder can mint it, and it names this entry's key.
   */
  entryOf(r: ProgressReceipt, generation: number, stored: StoredReport): ProgressEntry {
    const entry = reportOf(r, stored);
    const place = progressIdPlace(r.receipt_id);
    const findable = place?.assignment_id === r.assignment_id && place.seq === r.seq && isClaimReceiptId(r, generation);
    if (this.layout < 3 || !findable) return entry;
    return { ...entry, indexed: indexFacts(r, stored) };
  }

  /** Writes the entry once; returns the one that stands (an earlier writer's, if any) and whether this write made it. */
  async record(entry: ProgressEntry): Promise<{ created: boolean; standing: ProgressEntry }> {
    const res = await this.store.create(progressKey(entry), entry);
    return res.created ? { created: true, standing: entry } : { created: false, standing: res.existing.value };
  }

  /** All progress of an assignment, by seq: what its record carries and what the bucket holds. */
  async list(a: AssignmentRecord): Promise<ProgressEntry[]> {
    const carried = a.progress_log ?? [];
    const seqs = new Set(carried.map((p) => p.seq));
    const entries = (await this.store.entries(`${a.assignment_id}.*`)).map((e) => e.value).filter((p) => !seqs.has(p.seq));
    return [...carried, ...entries].sort((x, y) => x.seq - y.seq);
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

/** The report itself, as either place stores it. */
function reportOf(r: ProgressReceipt, stored: StoredReport): ProgressEntry {
  return { assignment_id: r.assignment_id, seq: r.seq, receipt_id: r.receipt_id, progress: r.progress, at: stored.at };
}

/** What the receipt index would hold of the report's receipt, kept beside the report where it stands as its index entry. */
function indexFacts(r: ProgressReceipt, stored: StoredReport): NonNullable<ProgressEntry["indexed"]> {
  return { executor_id: r.executor_id, body_digest: stored.body_digest, stream_seq: stored.stream_seq };
}

function progressKey(place: { assignment_id: string; seq: number }): string {
  return `${place.assignment_id}.${place.seq}`;
}
