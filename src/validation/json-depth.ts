/**
 * Nesting bounds for untrusted JSON and msgpack. The projection, canonical JSON and JSON Schema
 * validation all recurse over a value, so an unbounded depth would be a stack overflow waiting for
 * the first hostile body; both checks below are iterative and linear.
 */
export const DEFAULT_MAX_JSON_DEPTH = 64;

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
