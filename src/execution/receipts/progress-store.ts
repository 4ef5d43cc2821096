import type { ProgressEntry } from "../model/records.js";
import type { VersionedStore } from "../../kv/versioned-store.js";

/**
 * Progress of running assignments, one create-only entry per `<assignment>.<seq>`. Receipts may be
 * processed out of order (several gateways share one consumer), so the order is the `seq`, not the
 * arrival: gaps are allowed (a lost report never blocks a final result) and a late lower seq still
 * fills its place. The same seq from another receipt is a conflict.
 */
export class ProgressStore {
  constructor(private readonly store: VersionedStore<ProgressEntry>) {}

  /** `created` the first time, `stored` when the same receipt stored it before, `conflict` for another receipt's seq. */
  async record(entry: ProgressEntry): Promise<"created" | "stored" | "conflict"> {
    const res = await this.store.create(`${entry.assignment_id}.${entry.seq}`, entry);
    if (res.created) return "created";
    return res.existing.value.receipt_id === entry.receipt_id ? "stored" : "conflict";
  }

  /** All progress of an assignment, by seq. */
  async list(assignmentId: string): Promise<ProgressEntry[]> {
    const entries = await this.store.entries(`${assignmentId}.*`);
    return entries.map((e) => e.value).sort((a, b) => a.seq - b.seq);
  }
}
