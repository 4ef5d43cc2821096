import { hash } from "node:crypto";
import { withCanonicalJson } from "../budget/index.js";
import { RECEIPT_TRANSPORT_FIELDS, type Receipt } from "./messages.js";

/**
 * Digests both sides of the protocol compute the same way: sha256 (hex) over canonical compact JSON,
 * never over msgpack (two encoders may order map keys differently; canonical JSON cannot).
 * A value that is not representable as JSON (NaN, Infinity, undefined, binary, a cycle) throws the
 * budget engine's `CanonicalJsonError`.
 */
function sha256Hex(bytes: Uint8Array): string {
  return hash("sha256", bytes, "hex"); // one-shot: no Hash object per digest
}

/** sha256 (hex) of a value's canonical JSON, hashed where it was written (no copy of the bytes). */
export function canonicalDigest(value: unknown): string {
  return withCanonicalJson(value, sha256Hex);
}

/** The grant's `argument_digest`. */
export function argumentDigest(args: unknown): string {
  return canonicalDigest(args);
}

/** A receipt without its transport fields (`claim_token`, `replayed`): what a resend must repeat exactly. */
export function receiptBody(receipt: Receipt): Record<string, unknown> {
  const body: Record<string, unknown> = { ...receipt };
  for (const field of RECEIPT_TRANSPORT_FIELDS) delete body[field];
  return body;
}

/** The digest the receipt index keys duplicates and conflicts on. */
export function receiptBodyDigest(receipt: Receipt): string {
  return canonicalDigest(receiptBody(receipt));
}
