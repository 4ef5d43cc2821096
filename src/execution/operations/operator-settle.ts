import { createHash } from "node:crypto";
import type { JetStreamClient } from "@nats-io/jetstream";
import { z } from "zod";
import { encodeCanonicalJson, jsonValueSchema } from "../../budget/index.js";
import { ToolgateError } from "../../errors/toolgate-error.js";
import { encode } from "../../wire/codec.js";
import type { OperatorReceipt } from "../../wire/messages.js";
import { ErrorBody, Reason } from "../../wire/primitives.js";
import { subjects } from "../../wire/subjects.js";
import { nextAssignmentState, type AssignmentEvent } from "../model/assignment-states.js";
import type { ProjectionStore } from "../receipts/projection-store.js";
import { replacing } from "../receipts/receipt-index.js";
import type { AssignmentRecord, Outcome, RunRecord } from "../model/records.js";
import { runTakesWork } from "../model/run-states.js";
import type { VersionedStore } from "../../kv/versioned-store.js";
import type { BackgroundTasks } from "../tasks/background-tasks.js";

/** What an operator established in the product's system (the body of `POST /v1/assignments/{id}:reconcile`). */
export const OperatorOutcome = z.discriminatedUnion("outcome", [
  z.strictObject({ outcome: z.literal("completed"), result: jsonValueSchema.describe("The result the operation did produce") }),
  z.strictObject({ outcome: z.literal("failed"), error: ErrorBody.extend({ code: ErrorBody.shape.code.min(1) }) }),
  z.strictObject({ outcome: z.literal("cancelled"), reason: Reason.min(1) }),
]);
export type OperatorOutcome = z.output<typeof OperatorOutcome>;

const EVENT: Record<OperatorOutcome["outcome"], AssignmentEvent> = { completed: "complete", failed: "fail", cancelled: "cancel" };

/** `<assignment>_operator`, or a digest of it past the 128-character id limit. */
export function operatorReceiptId(assignmentId: string): string {
  const id = `${assignmentId}_operator`;
  return id.length <= 128 ? id : `op_${createHash("sha256").update(id).digest("hex")}`;
}

/**
 * An operator settles a `reconciliation_required` assignment over HTTP (`runner.reconcile` without the
 * runner): the settlement is an operator receipt with its own id, kept in `TG_RECEIPTS` (audit) and
 * applied by the table's `complete` / `fail` / `cancel` edge, with who did it. The same settlement
 * again is answered as before; another one after it is a conflict.
 */
export class OperatorSettlement {
  constructor(
    private readonly runs: VersionedStore<RunRecord>,
    private readonly assignments: VersionedStore<AssignmentRecord>,
    private readonly js: JetStreamClient,
    private readonly projections: ProjectionStore,
    private readonly tasks: BackgroundTasks,
    private readonly now: () => number = Date.now,
  ) {}

  async settle(assignmentId: string, operator: string, request: OperatorOutcome): Promise<AssignmentRecord> {
    const a = (await this.assignments.get(assignmentId))?.value;
    if (!a) throw new ToolgateError("assignment_not_found", `assignment '${assignmentId}' does not exist`);
    const receiptId = operatorReceiptId(assignmentId);
    const digest = bodyDigest(request);
    if (a.final?.receipt_id === receiptId) {
      if (a.final.body_digest !== digest)
        throw new ToolgateError("receipt_conflict", `assignment '${assignmentId}' was already settled by an operator with another outcome`);
      return a;
    }
    if (a.state !== "reconciliation_required")
      throw new ToolgateError(
        "not_reconciliation_required",
        `assignment '${assignmentId}' is ${a.state}: only reconciliation_required is settled by an operator`,
      );
    if (!runTakesWork(a, (await this.runs.get(a.run_id))?.value ?? null))
      throw new ToolgateError("run_terminated", `run '${a.run_id}' has ended: nothing of it changes any more`);

    const at = this.now();
    const receipt = operatorReceipt(receiptId, assignmentId, operator, at, request);
    const ack = await this.js.publish(subjects.operatorReceipt(a.scope, assignmentId), encode(receipt), { msgID: receiptId });
    const res = await this.assignments.mutate(assignmentId, (cur) => {
      const to = nextAssignmentState(cur.state, EVENT[request.outcome]);
      if (cur.state !== "reconciliation_required" || !to) return { result: false };
      const final = { receipt_id: receiptId, kind: request.outcome, body_digest: digest, stream_seq: ack.seq, at };
      const next: AssignmentRecord = {
        ...cur,
        state: to,
        final,
        outcome: outcomeOf(request),
        settled_by: { operator, at },
        ...replacing(cur, cur.final),
        updated_at: at,
      };
      if (request.outcome === "completed" && to === "completed") return { ...this.projections.carrying(next, receiptId, request.result), result: true };
      return { write: next, result: true };
    });
    if (!res) throw new ToolgateError("assignment_not_found", `assignment '${assignmentId}' does not exist`);
    // Lost to the executor's own reconcile: the operator receipt stays in the stream, unapplied.
    if (!res.result && res.value.final?.receipt_id !== receiptId)
      throw new ToolgateError("not_reconciliation_required", `assignment '${assignmentId}' was settled meanwhile (${res.value.state})`);
    if (res.value.state === "completed" && request.outcome === "completed") await this.projections.ensure(res.value, request.result);
    // A background task's settlement is its own history entry, as an executor's would be.
    await this.tasks.afterReceipt(res.value);
    return res.value;
  }
}

function operatorReceipt(receiptId: string, assignmentId: string, operator: string, at: number, r: OperatorOutcome): OperatorReceipt {
  const base = { receipt_id: receiptId, assignment_id: assignmentId, operator, at };
  switch (r.outcome) {
    case "completed":
      return { ...base, kind: "completed", result: r.result };
    case "failed":
      return { ...base, kind: "failed", error: r.error };
    case "cancelled":
      return { ...base, kind: "cancelled", reason: r.reason };
  }
}

function outcomeOf(r: OperatorOutcome): Outcome {
  if (r.outcome === "completed") return { kind: "completed" };
  return r.outcome === "failed" ? { kind: "failed", error: r.error } : { kind: "cancelled", reason: r.reason };
}

/** What makes two settlements the same: the outcome and its content (not who sent it, nor when). */
function bodyDigest(r: OperatorOutcome): string {
  return createHash("sha256").update(encodeCanonicalJson(r)).digest("hex");
}
