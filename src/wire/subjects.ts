/**
 * Every NATS subject of the executor protocol, in one place. Tokens are validated ids
 * (`[A-Za-z0-9_-]+`), so no subject can be widened by a crafted id.
 *
 * The executor *scope* (a product's group of executors) is a subject token wherever an executor
 * publishes or subscribes, and so is the executor's own id wherever it speaks for itself (claims,
 * heartbeats, receipt queries, receipts): NATS permissions then confine an executor to its own
 * tokens, and the gateway refuses a message whose `executor_id` differs from its subject's.
 */
import { ID_TOKEN } from "./primitives.js";

export const SUBJECT_ROOT = "tg";

export const subjects = {
  /**
   * Candidate of one assignment (WorkQueue stream; no arguments, no grant), on a subject of its own:
   * the gateway finds or takes back an assignment's candidate by subject, never by a sequence it
   * would have to write back into the assignment.
   */
  candidate: (scope: string, bindingId: string, assignmentId: string) => `tg.cand.${scope}.${bindingId}.${assignmentId}`,
  /** Filter of the durable candidate consumer shared by one scope's executors. */
  candidateFilter: (scope: string) => `tg.cand.${scope}.>`,
  /**
   * The candidates stream's anchor (`CandidateAnchor`): three tokens, so no scope's filter
   * (`tg.cand.<scope>.>`, four or more) ever delivers it.
   */
  candidateAnchor: "tg.cand.anchor",
  /** Claim request/reply of one executor, served by the gateways' queue group. */
  claim: (scope: string, executorId: string) => `tg.claim.${scope}.${executorId}`,
  /** Presence heartbeat request/reply of one executor. */
  presence: (scope: string, executorId: string) => `tg.presence.${scope}.${executorId}`,
  /** A receipt of one executor, published into the receipts stream with `Nats-Msg-Id = receipt_id`. */
  receipt: (scope: string, executorId: string, assignmentId: string) => `tg.rcpt.${scope}.${executorId}.${assignmentId}`,
  /**
   * An executor's report, at start-up, of the claims its store still holds (request/reply): the
   * gateway detaches it from the claims it holds under that id but the report leaves out.
   */
  heldClaims: (scope: string, executorId: string) => `tg.held.${scope}.${executorId}`,
  /** Receipt status look-up (after a lost answer) request/reply of one executor. */
  receiptQuery: (scope: string, executorId: string) => `tg.rq.${scope}.${executorId}`,
  /** The gateway's answers to one executor (core NATS). */
  answers: (scope: string, executorId: string) => `tg.ans.${scope}.${executorId}`,
  /** Control messages addressed to one executor (run cancelled, task cancel, detach); 4 tokens. */
  executorControl: (scope: string, executorId: string) => `tg.ctl.${scope}.${executorId}`,
  /** Control catch-up request/reply of one executor: its stored control messages since a time. */
  controlQuery: (scope: string, executorId: string) => `tg.ctlq.${scope}.${executorId}`,
  /** A product's request to the gateways (`task_cancel`, `compensate`); 3 tokens, so it never matches an executor's subject. */
  controlRequest: (type: string) => `tg.ctl.${type}`,
  /** Filter of the gateways' consumer of product requests (`*` is one token: executor subjects have two). */
  controlRequestFilter: "tg.ctl.*",
  /** An operator's settlement receipt, kept in the receipts stream; no executor publishes here. */
  operatorReceipt: (scope: string, assignmentId: string) => `tg.oprcpt.${scope}.${assignmentId}`,
  /** Events of one run (for SSE clients). */
  runEvents: (runId: string) => `tg.evt.${runId}`,
} as const;

/** Queue group shared by all gateway replicas for request/reply subjects. */
export const GATEWAY_QUEUE = "toolgate-gateway";

/** True when `value` can stand as one subject token (and one KV key token). */
export function isSubjectToken(value: string): boolean {
  return ID_TOKEN.test(value);
}

/**
 * Inbox prefix of one executor's connection (`inboxPrefix` of nats.js): its request replies and pulled
 * candidates arrive under it. The generated NATS config lets each executor subscribe only below its
 * own prefix, so no executor can read another's grants (arguments, claim tokens) from an inbox.
 */
export const executorInboxPrefix = (scope: string, executorId: string): string => `_INBOX_TG.${scope}.${executorId}`;

/**
 * JetStream API prefix of executor connections (`jetstream(nc, { apiPrefix })`). Executors reach only
 * two JetStream operations, consumer info and pull of their scope's candidate consumer, under this
 * prefix: in the secured layout it is the import of the gateway account's `$JS.API` (an account
 * without JetStream answers `$JS.API` itself); on an unsecured server the gateway forwards it.
 */
export const EXECUTOR_JS_API_PREFIX = "tg.jsapi";
