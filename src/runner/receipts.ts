import { CanonicalJsonError, parseExactJson, toJsonText } from "../budget/index.js";
import { Receipt, type Grant, type ReceiptKind } from "../wire/messages.js";
import { receiptId } from "../wire/receipt-ids.js";
import type { OutboxReceipt, ReceiptBody } from "./store.js";

/** What a final (terminal or reconciliation) receipt says, besides its envelope. */
export type FinalReport =
  | { kind: "completed"; result: unknown }
  | { kind: "failed"; error: { code: string; message: string } }
  | { kind: "cancelled"; reason: string }
  | { kind: "reconciliation_required"; error: { code: string; message: string } };

/** What one receipt carries besides its envelope. */
export type ReceiptContent =
  | { kind: "accepted"; operation_key: string; argument_digest: string }
  | { kind: "refused"; error: { code: string; message: string } }
  | { kind: "progress"; seq: number; progress: unknown }
  | { kind: "submission"; task_ref: string; status: string }
  | FinalReport;

const CODE_MAX = 128;
const TEXT_MAX = 4096;

/**
 * Builds the outbox entry of a receipt. Values are normalised through JSON here, once: what is
 * saved is exactly what is sent on every resend, whatever store holds it. `rerun`: see `receiptId`.
 */
export function buildReceipt(grant: Grant, content: ReceiptContent, now: number, rerun?: string): OutboxReceipt {
  const key = { assignmentId: grant.assignment_id, generation: grant.generation };
  const id = receiptId(grant, content, rerun);
  const text = jsonText({ receipt_id: id, assignment_id: grant.assignment_id, executor_id: grant.executor_id, ...bounded(content) });
  const body = parseExactJson(text) as ReceiptBody;
  bodyTexts.set(body, text);
  // Validates the body against the wire schema before it is saved: a receipt the gateway would
  // reject as malformed must fail here, in the handler's hands, not later in the outbox.
  Receipt.parse({ ...body, claim_token: grant.claim_token });
  return { ...key, receiptId: id, kind: content.kind, body, savedAt: now };
}

/**
 * The wire message of a saved receipt. Not parsed again on every send: `buildReceipt` validated the
 * body against the same schema, and the outbox checks what it reads back from the store (`resume`).
 */
export function wireReceipt(saved: OutboxReceipt, claimToken: string, replayed: boolean): Receipt {
  const fields: Record<string, unknown> = { ...saved.body, claim_token: claimToken, ...(replayed ? { replayed: true } : {}) };
  // Keys in the schema's order, as `Receipt.parse` returns them: the same bytes on the wire.
  const wire: Record<string, unknown> = {};
  for (const key of WIRE_KEYS.get(saved.kind) ?? []) if (key in fields) wire[key] = fields[key];
  return wire as Receipt;
}

/** Each receipt kind's keys in its schema's order (a body is saved in canonical, sorted, order). */
const WIRE_KEYS: ReadonlyMap<ReceiptKind, readonly string[]> = new Map(
  Receipt.options.map((variant) => [variant.shape.kind.value, Object.keys(variant.shape)]),
);

function bounded(content: ReceiptContent): ReceiptContent {
  switch (content.kind) {
    case "refused":
    case "failed":
    case "reconciliation_required":
      return { kind: content.kind, error: { code: clip(content.error.code, CODE_MAX), message: clip(content.error.message, TEXT_MAX) } };
    case "cancelled":
      return { kind: content.kind, reason: clip(content.reason, TEXT_MAX) };
    default:
      return content;
  }
}

function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

export class UnrepresentableValueError extends Error {
  override readonly name = "UnrepresentableValueError";
}

/**
 * The canonical JSON text of `value` (plain objects, arrays, strings, finite numbers, bigints, booleans,
 * null), exact numbers kept. Members whose value is `undefined` are left out, as JSON.stringify does;
 * throws on what JSON would silently alter: NaN/Infinity, functions, cycles, Dates and other class instances.
 */
function jsonText(value: unknown): string {
  try {
    return toJsonText(value);
  } catch (err) {
    throw err instanceof CanonicalJsonError ? new UnrepresentableValueError(err.message) : err;
  }
}

/** The JSON text of each body `buildReceipt` made, so that saving it does not write the same body out again. */
const bodyTexts = new WeakMap<ReceiptBody, string>();

/** A body's canonical JSON text, as a store saves it. */
export function receiptBodyText(body: ReceiptBody): string {
  return bodyTexts.get(body) ?? toJsonText(body);
}
