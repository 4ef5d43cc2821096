import { buildContextPreview } from "../../budget/index.js";
import type { AssignmentRecord, CarriedProjection, ProjectionRecord } from "../model/records.js";
import type { ReceiptLog } from "./receipt-log.js";
import type { VersionedStore } from "../../kv/versioned-store.js";
import { encode } from "../../wire/codec.js";
import type { StoreLayout } from "../model/store-layout.js";

/** Room left in the message beside the completed record: its headers and subject. */
const RECORD_MARGIN_BYTES = 4_096;

/**
 * The projection of each completed assignment: formed once, from the first `completed` receipt,
 * with the tool's `max_result_context_bytes`. Whoever stores first wins and everyone serves that one
 * forever, so the model's context prefix never changes under it (not after a restart, nor after
 * the projection algorithm changes). Both places are read, whichever this gateway writes
 * (`StoreLayout`: the bucket under 1, the completing record from 2 on).
 */
export class ProjectionStore {
  constructor(
    private readonly records: VersionedStore<ProjectionRecord>,
    private readonly receipts: ReceiptLog,
    private readonly layout: StoreLayout,
    /** The largest message the server takes (its `max_payload`): a stored record must fit in one. */
    private readonly maxMessageBytes: () => number,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * The write of the compare-and-set that completes an assignment as `next` with receipt
   * `receiptId`: `next` carrying the projection from layout 2 on, with its encoding (measured
   * against the message limit, so the store writes these bytes and encodes nothing again); `next`
   * as it is under layout 1 (`store` writes the projection afterwards), or when the record would not
   * fit in one message with it (arguments close to the server's limit): that call's projection goes
   * to the bucket, where every reader also looks.
   */
  carrying(next: AssignmentRecord, receiptId: string, result: unknown): { write: AssignmentRecord; encoded?: Uint8Array } {
    if (this.layout < 2) return { write: next };
    const write = { ...next, projection: this.form(next, receiptId, result) };
    const encoded = encode(write);
    return encoded.byteLength + RECORD_MARGIN_BYTES <= this.maxMessageBytes() ? { write, encoded } : { write: next };
  }

  /**
   * The stored projection of a completed assignment, forming it if a crash left it missing (the
   * result is read back from the receipts stream when the caller does not hold it). One carried by
   * the record is served as it is.
   */
  async ensure(a: AssignmentRecord, result?: unknown): Promise<ProjectionRecord> {
    const final = completedBy(a);
    if (a.projection) return { assignment_id: a.assignment_id, ...a.projection };
    const stored = (await this.records.get(a.assignment_id))?.value;
    if (stored) return stored;
    return this.store(a, result !== undefined ? result : await this.receipts.completedResult(final));
  }

  /**
   * Forms and stores the projection without looking for one first: for the receipt that has just
   * completed the assignment (no one else can have stored it yet; should someone have, the
   * create-only write keeps theirs and returns it). A record that carries it needs nothing stored.
   */
  async store(a: AssignmentRecord, result: unknown): Promise<ProjectionRecord> {
    const final = completedBy(a);
    if (a.projection) return { assignment_id: a.assignment_id, ...a.projection };
    const record: ProjectionRecord = { assignment_id: a.assignment_id, ...this.form(a, final.receipt_id, result) };
    const res = await this.records.create(a.assignment_id, record);
    return res.created ? record : res.existing.value;
  }

  private form(a: AssignmentRecord, receiptId: string, result: unknown): CarriedProjection {
    return {
      receipt_id: receiptId,
      context_preview: buildContextPreview(result, { maxResultContextBytes: a.max_result_context_bytes, kind: "completed", preserveFields: a.preserve_fields }),
      computed_at: this.now(),
    };
  }
}

function completedBy(a: AssignmentRecord): NonNullable<AssignmentRecord["final"]> {
  if (a.state !== "completed" || !a.final) throw new Error(`assignment ${a.assignment_id} is ${a.state}: only a completed one has a projection`);
  return a.final;
}
