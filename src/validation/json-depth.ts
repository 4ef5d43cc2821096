/**
 * Nesting bounds for untrusted JSON and msgpack. The projection, canonical JSON and JSON Schema
 * validation all recurse over a value, so an unbounded depth would be a stack overflow waiting for
 * the first hostile body; both checks below are iterative and linear.
 */
export const DEFAULT_MAX_JSON_DEPTH = 64;

/** The highest bound a JSON body may be given (`TOOLGATE_JSON_MAX_DEPTH` allows 8..1024). */
export const MAX_INGRESS_JSON_DEPTH = 1024;

/**
 * Levels a stored record may add around a value accepted at an ingress bound: a result that came inside
 * a receipt sits one level deeper in its projection record (`context_preview.result`).
 */
export const RECORD_ENVELOPE_DEPTH = 8;

/**
 * The bound for reading back what toolgate stored itself (KV records, receipts and events in their
 * streams): what any ingress bound accepted, inside its record. Reading with an ingress bound would make
 * a record unreadable whose value was accepted (a 63-level result is 65 levels in its projection record).
 */
export const STORED_MAX_JSON_DEPTH = MAX_INGRESS_JSON_DEPTH + RECORD_ENVELOPE_DEPTH;

const OPEN_BRACKET = 0x5b;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACKET = 0x5d;
const CLOSE_BRACE = 0x7d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/** True when JSON text nests arrays/objects deeper than `max` (strings are skipped, escapes honoured). */
export function jsonTextTooDeep(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) inString = true;
    else if (c === OPEN_BRACKET || c === OPEN_BRACE) {
      if (++depth > max) return true;
    } else if (c === CLOSE_BRACKET || c === CLOSE_BRACE) depth--;
  }
  return false;
}

/** True when a decoded value nests arrays/objects deeper than `max` (iterative; stops at the first too-deep branch). */
export function valueTooDeep(value: unknown, max: number): boolean {
  const stack: { v: unknown; d: number }[] = [{ v: value, d: 0 }];
  while (stack.length > 0) {
    const { v, d } = stack.pop()!;
    if (v === null || typeof v !== "object" || ArrayBuffer.isView(v)) continue;
    if (d + 1 > max) return true;
    for (const child of Array.isArray(v) ? v : Object.values(v)) stack.push({ v: child, d: d + 1 });
  }
  return false;
}
