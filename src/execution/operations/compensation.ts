import { createHash } from "node:crypto";
import { ToolgateError } from "../../errors/toolgate-error.js";
import type { Dispatcher } from "../dispatch/dispatcher.js";
import { unstartedAssignment, type AssignmentRecord } from "../model/records.js";
import type { VersionedStore } from "../../kv/versioned-store.js";
import type { Watchlist } from "../claims/watchlist.js";
import { OPERATION_KEY_MAX_LENGTH } from "../../wire/primitives.js";

/** The compensation's id: derived from the original, so asking twice lands on the same assignment. */
export function compensationIdFor(originalId: string): string {
  return `cmp_${createHash("sha256").update(`${originalId}\ncompensate`, "utf8").digest("base64url").slice(0, 32)}`;
}

/** `<original op key>/compensate`, or a digest of it when that would exceed the wire limit. */
export function compensationOperationKey(originalKey: string): string {
  const key = `${originalKey}/compensate`;
  return key.length <= OPERATION_KEY_MAX_LENGTH ? key : `sha256:${createHash("sha256").update(key).digest("hex")}/compensate`;
}

/**
 * Compensation (docs/protocol.md section 4): a NEW assignment that undoes a completed write, with its own
 * operation key and its own receipts, handled by the tool's `compensate` handler. The original keeps
 * its receipt and projection; it only gains the link `compensated_by`, the new one carries
 * `compensates`. Idempotent: compensating twice returns the same compensation.
 */
export class CompensationService {
  constructor(
    private readonly assignments: VersionedStore<AssignmentRecord>,
    private readonly dispatcher: Dispatcher,
    private readonly watchlist: Watchlist,
    /** After this long a sweeper finishes a compensation whose request died half-way. */
    private readonly dispatchGraceMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  async compensate(assignmentId: string): Promise<{ created: boolean; compensation: AssignmentRecord }> {
    const original = (await this.assignments.get(assignmentId))?.value;
    if (!original) throw new ToolgateError("assignment_not_found", `assignment '${assignmentId}' does not exist`);
    if (original.compensated_by) return { created: false, compensation: await this.finish(original.compensated_by) };
    if (original.compensates) throw new ToolgateError("compensation_not_compensable", `assignment '${assignmentId}' is itself a compensation`);
    if (original.tool_kind !== "write") throw new ToolgateError("read_not_compensable", `tool '${original.tool_name}' is a read: it changed nothing to undo`);
    if (original.state !== "completed")
      throw new ToolgateError("not_completed", `assignment '${assignmentId}' is ${original.state}: only a completed write can be compensated`);

    const id = compensationIdFor(assignmentId);
    const now = this.now();
    // Its own operation: none of the original's receipts (the replaced ones, its progress), background task or projection is its.
    const { task: _task, replaced: _replaced, progress_log: _progress, progress_in_bucket: _inBucket, projection: _projection, ...call } = original;
    const record: AssignmentRecord = {
      ...call,
      assignment_id: id,
      tool_call_id: null,
      operation_key: compensationOperationKey(original.operation_key),
      ...unstartedAssignment(),
      compensates: assignmentId,
      created_at: now,
      updated_at: now,
    };
    // Watched first: should this process die before the dispatch, a sweeper offers it.
    const watch = await this.watchlist.watch(id, now + this.dispatchGraceMs);
    const res = await this.assignments.create(id, record);
    await this.assignments.mutate(assignmentId, (cur) =>
      cur.compensated_by ? { result: undefined } : { write: { ...cur, compensated_by: id, updated_at: now }, result: undefined },
    );
    const compensation = await this.finish(id);
    await this.watchlist.unwatch(id, watch);
    return { created: res.created, compensation };
  }

  /** The compensation as it stands, its dispatch finished if a crash interrupted it. */
  private async finish(id: string): Promise<AssignmentRecord> {
    const a = await this.dispatcher.dispatch(id);
    if (!a) throw new ToolgateError("compensation_missing", `compensation '${id}' is linked but missing`);
    return a;
  }
}
