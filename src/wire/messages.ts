import { z } from "zod";
import { REFUSAL_CODE_NAMES } from "../errors/protocol-codes.js";
import { LONGEST_TOGETHER } from "./receipt-chains.js";
import { AGENT_VERSION_ID_MAX_LENGTH, ErrorBody, Id, Millis, OperationKey, Reason, Sha256Hex, ToolKind, ToolName, oneOrMany } from "./primitives.js";

/**
 * The executor protocol's messages (NATS side). One zod schema per message: the gateway and the
 * ToolRunner SDK both validate with these, so the two sides cannot drift.
 */

/** The ToolRunner SDK takes the id primitive from here. */
export { Id };

/** sha256 (hex) of the arguments' canonical compact JSON (`argumentDigest` of `src/wire/digest.ts`). */
const ArgumentDigest = Sha256Hex;

/** A JSON value as decoded; whether it is representable (no NaN, no cycles...) is checked by the budget engine's canonical JSON. */
const JsonValue = z.unknown();

/** What an executor sees before it holds a claim: ids only, never arguments or a grant. */
export const Candidate = z
  .object({
    assignment_id: Id,
    run_id: Id,
    tool_name: ToolName,
    binding_id: Id,
    /** Bumped each time the assignment returns to the candidates (lease expiry, release, detach). */
    generation: z.number().int().nonnegative(),
    created_at: Millis,
  })
  .strict();
export type Candidate = z.infer<typeof Candidate>;

export const ClaimRequest = z
  .object({
    assignment_id: Id,
    executor_id: Id,
    /** The candidate's generation, so a stale candidate message can never claim a newer round. */
    generation: z.number().int().nonnegative(),
  })
  .strict();
export type ClaimRequest = z.infer<typeof ClaimRequest>;

/** Everything the executor (and the product's authorize hook) needs, handed out only with the claim. */
export const Grant = z
  .object({
    assignment_id: Id,
    run_id: Id,
    session_id: Id,
    executor_id: Id,
    tool_name: ToolName,
    binding_id: Id,
    tool_kind: ToolKind,
    arguments: JsonValue,
    argument_digest: ArgumentDigest,
    /** The end user the run acts for. */
    subject: z.string(),
    agent: Id,
    /** `<agent>.<n>` as published (it has a dot, so it is not an Id token); only its length is checked, so a runner's stored grants read as before. */
    agent_version: z.string().min(1).max(AGENT_VERSION_ID_MAX_LENGTH),
    toolset: Id,
    toolset_version: z.string(),
    operation_key: OperationKey,
    /** Proof of the claim; every receipt for this assignment must carry it. */
    claim_token: z.string().min(32).max(128),
    generation: z.number().int().nonnegative(),
    /** An unconfirmed claim returns to the candidates after this instant. */
    lease_expires_at: Millis,
    /**
     * Set on a compensation: the completed write this assignment undoes, with its operation key and
     * its completed result, so the executor's `compensate` handler knows what to undo.
     */
    compensates: z.object({ assignment_id: Id, operation_key: OperationKey, result: JsonValue }).strict().optional(),
  })
  .strict();
export type Grant = z.infer<typeof Grant>;

/** A refusal or rejection code the gateway answers an executor with; each is declared (where it travels, what it means) in `REFUSAL_CODES`. */
export const RefusalCode = z.enum(REFUSAL_CODE_NAMES);
export type RefusalCode = z.infer<typeof RefusalCode>;

/** The answer to a request the gateway does not take up (a claim refused, a malformed request, not the requester's to ask): why, nothing else. */
export const RequestRefused = z.object({ status: z.literal("refused"), code: RefusalCode, reason: z.string() }).strict();
export type RequestRefused = z.infer<typeof RequestRefused>;

export const ClaimReply = z.discriminatedUnion("status", [z.object({ status: z.literal("granted"), grant: Grant }).strict(), RequestRefused]);
export type ClaimReply = z.infer<typeof ClaimReply>;

/** `refused`: the executor turns the grant down before any side effect (digest, arguments, authorize), instead of `accepted`. */
export const ReceiptKind = z.enum(["accepted", "refused", "progress", "submission", "completed", "failed", "cancelled", "reconciliation_required"]);
export type ReceiptKind = z.infer<typeof ReceiptKind>;

const ReceiptBase = {
  /** Chosen by the executor, stable across resends (`Nats-Msg-Id`). */
  receipt_id: Id,
  assignment_id: Id,
  executor_id: Id,
  claim_token: z.string().max(128),
  /** True on a resend from the outbox after a restart: verify and resend only, never rerun. */
  replayed: z.boolean().optional(),
};

/** Bytes (UTF-8) a submission's `task_ref` and `status` may take: the submission enters history whole, never cut, so it is bounded here instead. */
export const TASK_REF_MAX_BYTES = 256;
export const TASK_STATUS_MAX_BYTES = 1024;

const utf8Bytes = (s: string): number => Buffer.byteLength(s, "utf8");
/** The product's reference of a business task running in the background (its own id: a job, a batch, a deployment). */
export const TaskRef = z
  .string()
  .min(1)
  .refine((s) => utf8Bytes(s) <= TASK_REF_MAX_BYTES, { message: `task_ref_too_long: at most ${TASK_REF_MAX_BYTES} bytes of UTF-8` });
/** A short status the model reads as the tool call's answer ("report queued, about 10 minutes"). */
export const TaskStatus = z
  .string()
  .min(1)
  .refine((s) => utf8Bytes(s) <= TASK_STATUS_MAX_BYTES, { message: `submission_too_large: at most ${TASK_STATUS_MAX_BYTES} bytes of UTF-8` });
/** What a `submission` answers the tool call with: the task left running and its status. */
export const TaskSubmission = z.object({ task_ref: TaskRef, status: TaskStatus }).strict();
export type TaskSubmission = z.infer<typeof TaskSubmission>;

/**
 * A receipt. The *body* (everything but `claim_token` and `replayed`) is what must be identical on a
 * resend of the same `receipt_id`; its digest is `receiptBodyDigest` of `src/wire/digest.ts`.
 */
export const Receipt = z.discriminatedUnion("kind", [
  /** `argument_digest`: the digest of the grant the executor verified; the gateway compares it with the assignment's. */
  z.object({ ...ReceiptBase, kind: z.literal("accepted"), operation_key: z.string(), argument_digest: ArgumentDigest }).strict(),
  z.object({ ...ReceiptBase, kind: z.literal("refused"), error: ErrorBody }).strict(),
  z.object({ ...ReceiptBase, kind: z.literal("progress"), seq: z.number().int().positive(), progress: JsonValue }).strict(),
  /** The business task goes on in the background: the tool call is answered with this, the outcome follows by the same claim. */
  z.object({ ...ReceiptBase, kind: z.literal("submission"), ...TaskSubmission.shape }).strict(),
  z.object({ ...ReceiptBase, kind: z.literal("completed"), result: JsonValue }).strict(),
  z.object({ ...ReceiptBase, kind: z.literal("failed"), error: ErrorBody }).strict(),
  z.object({ ...ReceiptBase, kind: z.literal("cancelled"), reason: Reason }).strict(),
  z.object({ ...ReceiptBase, kind: z.literal("reconciliation_required"), error: ErrorBody }).strict(),
]);
export type Receipt = z.infer<typeof Receipt>;

const OperatorBase = {
  receipt_id: Id,
  assignment_id: Id,
  /** The HTTP identity that settled it. */
  operator: z.string().min(1).max(128),
  at: Millis,
};

/** Fields that travel with a receipt but are not part of its body. */
export const RECEIPT_TRANSPORT_FIELDS = ["claim_token", "replayed"] as const;

export const ReceiptStatus = z.enum([
  /** Stored and applied (for `accepted`: the confirmation, side effects may start). */
  "recorded",
  /** Same id, same body as one already stored: acknowledged, nothing changed. */
  "duplicate",
  /** Stored for audit; the run (or assignment) is terminated, so nothing changed. */
  "late_ignored",
  /** Refused (bad token, conflicting body, illegal transition...); nothing changed. */
  "rejected",
  /**
   * Not processed yet: the answer to a query about a receipt not taken yet, or to a receipt of a chain
   * that was not applied whole (nothing of it was stored: send it alone).
   */
  "pending",
]);
export type ReceiptStatus = z.infer<typeof ReceiptStatus>;

export const ReceiptAnswer = z
  .object({
    receipt_id: Id,
    assignment_id: Id,
    kind: ReceiptKind,
    status: ReceiptStatus,
    /** Set on `rejected` (why) and on `late_ignored` (`run_terminated`). */
    code: RefusalCode.optional(),
    reason: z.string().optional(),
  })
  .strict();
export type ReceiptAnswer = z.infer<typeof ReceiptAnswer>;

/**
 * What arrives on an executor's answers subject: one answer, or the answers to a progress report
 * and the final receipt sent right behind it, applied together (only to an executor that asked,
 * `Tg-Answers: joint`, `src/wire/receipt-order.ts`).
 */
export const ReceiptAnswers = oneOrMany(ReceiptAnswer, 1);
export type ReceiptAnswers = z.infer<typeof ReceiptAnswers>;

/**
 * What one message of the receipts stream holds: a receipt, or a chain of a read's first receipts
 * sent together (`src/wire/receipt-chains.ts`).
 */
export const ReceiptMessage = z.union([Receipt, z.array(Receipt).min(2).max(LONGEST_TOGETHER)]);
export type ReceiptMessage = z.infer<typeof ReceiptMessage>;

/**
 * Asks for the stored answer of a receipt (after a lost answer, or a resend the stream de-duplicated).
 * `body_digest` is the sender's `receiptBodyDigest`: a stored receipt of the same id with another body
 * is answered `rejected` `receipt_conflict`, so a resend the stream dropped as a duplicate cannot pass
 * another body off as stored.
 */
export const ReceiptQuery = z.object({ receipt_id: Id, assignment_id: Id, executor_id: Id, kind: ReceiptKind, body_digest: Sha256Hex }).strict();
export type ReceiptQuery = z.infer<typeof ReceiptQuery>;

/** What detaching an executor from its claims did, assignment by assignment (an operator's detach, or a held-claims report). */
export const DetachedClaims = z
  .object({
    released: z.array(Id).describe("Unconfirmed claims returned to the candidates (generation + 1)"),
    reconciliation_required: z.array(Id).describe("Confirmed work whose outcome is now unknown"),
    retried: z.array(Id).describe("Confirmed reads offered again (binding retry_reads_safe)"),
  })
  .strict();
export type DetachedClaims = z.infer<typeof DetachedClaims>;

/** Whether detaching moved any claim at all. */
export function detachedAny(d: DetachedClaims): boolean {
  return d.released.length + d.reconciliation_required.length + d.retried.length > 0;
}

/** The most claims one held-claims report may list (far above any executor's claim bound). */
export const HELD_CLAIMS_MAX = 4_096;

/**
 * An executor's report, at start-up before it pulls, of every claim its store still holds (`tg.held`).
 * The gateway detaches it from each claim it holds under this id that the report leaves out, as if
 * it had left (unconfirmed: back to the candidates; confirmed: `reconciliation_required`, a safe read
 * offered again): an executor that lost its store, or a confirmation it had not yet made durable,
 * does not leave the gateway waiting for work nobody is doing.
 */
export const HeldClaimsReport = z
  .object({
    executor_id: Id,
    scope: Id,
    held: z.array(z.object({ assignment_id: Id, generation: z.number().int().nonnegative() }).strict()).max(HELD_CLAIMS_MAX),
  })
  .strict();
export type HeldClaimsReport = z.infer<typeof HeldClaimsReport>;

/** `tg.held`'s answer: what the gateway detached, or a refusal of the report. */
export const HeldClaimsReply = z.discriminatedUnion("status", [DetachedClaims.extend({ status: z.literal("ok") }).strict(), RequestRefused]);
export type HeldClaimsReply = z.infer<typeof HeldClaimsReply>;

/** `tg.rq`'s answer: the receipt's stored answer, or a refusal of the query itself. */
export const ReceiptQueryReply = z.union([ReceiptAnswer, RequestRefused]);
export type ReceiptQueryReply = z.infer<typeof ReceiptQueryReply>;

export const PresenceHeartbeat = z
  .object({
    executor_id: Id,
    scope: Id,
    /** Bindings this executor serves (all inside its scope). */
    bindings: z.array(Id).max(1024),
    /** `detaching`: stop offering new work, release unconfirmed claims. */
    status: z.enum(["online", "detaching"]),
    in_flight: z.number().int().nonnegative(),
  })
  .strict();
export type PresenceHeartbeat = z.infer<typeof PresenceHeartbeat>;

/** `code` and `reason` come with `refused`. */
export const PresenceReply = z
  .object({ status: z.enum(["ok", "refused"]), ttl_ms: z.number().int().positive(), code: RefusalCode.optional(), reason: z.string().optional() })
  .strict();
export type PresenceReply = z.infer<typeof PresenceReply>;

/**
 * Messages to one executor on `tg.ctl.<scope>.<executor>`, kept in the `TG_CONTROL` stream so an
 * executor that was offline catches up. A compensation needs none: it is a new assignment and
 * arrives as a candidate like any other.
 */
export const ExecutorControl = z.discriminatedUnion("type", [
  /** The run was cancelled: stop, your later receipts will be late. */
  z.object({ type: z.literal("run_cancelled"), run_id: Id, assignment_ids: z.array(Id) }).strict(),
  /** A long-running business task should stop; confirm with `cancelled` or finish with `completed`. */
  z.object({ type: z.literal("task_cancel_requested"), assignment_id: Id, reason: Reason }).strict(),
  /** An operator detached this executor: stop pulling; its confirmed work was settled without it. */
  z.object({ type: z.literal("detach_requested"), executor_id: Id }).strict(),
]);
export type ExecutorControl = z.infer<typeof ExecutorControl>;

/** Asks for the control messages sent to this executor since `since` (what it missed while away). */
export const ControlQuery = z.object({ executor_id: Id, since: Millis }).strict();
export type ControlQuery = z.infer<typeof ControlQuery>;

export const CONTROL_QUERY_MAX = 1000;

/** The stored control messages, oldest first, each with the time the stream stored it; `more`: ask again from the last one. */
export const ControlQueryReply = z
  .object({ messages: z.array(z.object({ message: ExecutorControl, sent_at: Millis }).strict()).max(CONTROL_QUERY_MAX), more: z.boolean() })
  .strict();
export type ControlQueryReply = z.infer<typeof ControlQueryReply>;

/** `tg.ctlq`'s answer: the stored control messages, or a refusal of the query itself. */
export const ControlQueryResult = z.union([ControlQueryReply, RequestRefused]);
export type ControlQueryResult = z.infer<typeof ControlQueryResult>;

/**
 * What a product may publish to the gateways instead of calling the HTTP API (`tg.ctl.<type>`, kept in
 * `TG_CONTROL`, consumed by the gateways' shared durable consumer). The outcome shows on the
 * assignment and in the run's event stream.
 */
export const ControlRequest = z.discriminatedUnion("type", [
  z.object({ type: z.literal("task_cancel"), assignment_id: Id, reason: Reason.optional() }).strict(),
  z.object({ type: z.literal("compensate"), assignment_id: Id }).strict(),
]);
export type ControlRequest = z.infer<typeof ControlRequest>;
export const CONTROL_REQUEST_TYPES = ["task_cancel", "compensate"] as const satisfies readonly ControlRequest["type"][];

/**
 * An operator's settlement of a `reconciliation_required` assignment (HTTP, `tools:execute`): no claim
 * token, so it never travels on an executor's subject; kept in `TG_RECEIPTS` on `tg.oprcpt.<scope>.<assignment>`
 * beside the executors' receipts (the audit record), with `Nats-Msg-Id = receipt_id`.
 */
export const OperatorReceipt = z.discriminatedUnion("kind", [
  z.object({ ...OperatorBase, kind: z.literal("completed"), result: JsonValue }).strict(),
  z.object({ ...OperatorBase, kind: z.literal("failed"), error: ErrorBody }).strict(),
  z.object({ ...OperatorBase, kind: z.literal("cancelled"), reason: Reason }).strict(),
]);
export type OperatorReceipt = z.infer<typeof OperatorReceipt>;
