import { buildContextPreview } from "../../budget/index.js";
import type { AssignmentRecord, ProjectionRecord } from "../model/records.js";
import type { ReceiptLog } from "./receipt-log.js";
import type { VersionedStore } from "../../kv/versioned-store.js";

/**
 * The projection of each completed assignment: formed once, from the first `completed` receipt,
 * with the tool's `max_result_context_bytes`, and stored create-only. Whoever stores first wins and
 * everyone serves that one forever, so the model's context prefix never changes under it (not after
 * a restart, nor after the projection algorithm changes).
 */
export class ProjectionStore {
  constructor(
    private readonly records: VersionedStore<ProjectionRecord>,
    private readonly receipts: ReceiptLog,
    private readonly now: () => number = Date.now,
  ) {}

  async get(assignmentId: string): Promise<ProjectionRecord | null> {
    return (await this.records.get(assignmentId))?.value ?? null;
  }

  /**
   * The stored projection of a completed assignment, forming it if a crash left it missing (the
   * result is read back from the receipts stream when the caller does not hold it).
   */
  async ensure(a: AssignmentRecord, result?: unknown): Promise<ProjectionRecord> {
    if (a.state !== "completed" || !a.final) throw new Error(`assignment ${a.assignment_id} is ${a.state}: only a completed one has a projection`);
    const stored = await this.get(a.assignment_id);
    if (stored) return stored;
    return this.store(a, result !== undefined ? result : await this.receipts.completedResult(a.final.stream_seq));
  }

  /**
   * Forms and stores the projection without looking for one first: for the receipt that has just
   * completed the assignment (no one else can have stored it yet; should someone have, the
   * create-only write keeps theirs and returns it).
   */
  async store(a: AssignmentRecord, result: unknown): Promise<ProjectionRecord> {
    if (a.state !== "completed" || !a.final) throw new Error(`assignment ${a.assignment_id} is ${a.state}: only a completed one has a projection`);
    const record: ProjectionRecord = {
      assignment_id: a.assignment_id,
      receipt_id: a.final.receipt_id,
      context_preview: buildContextPreview(result, { maxResultContextBytes: a.max_result_context_bytes, kind: "completed", preserveFields: a.preserve_fields }),
      computed_at: this.now(),
    };
    const res = await this.records.create(a.assignment_id, record);
    return res.created ? record : res.existing.value;
  }
}
