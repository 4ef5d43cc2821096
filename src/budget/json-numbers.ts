/**
 * Exact JSON numbers. JSON text (and msgpack) carries integers of any size and tells an integer from a
 * float; a JS number does neither. What the budget measures is Python's spelling of the value Python would
 * read, so a number is kept in the form that still knows it:
 *
 * - a `number` that is an integer of magnitude at most 2**53 is an integer (`5`, `-0` is `0`);
 * - any other `number` is a float, written as Python's `repr(float)` (`1.5`, `1e-05`, `1e+16`);
 * - a `bigint` is an integer beyond 2**53, exact at any size (up to Python's 4300 digits);
 * - a `JsonFloat` is a float whose value is an integer of magnitude at most 2**53 (`1.0`, `-0.0`, `1e3`
 *   read from text): the one case a `number` would turn into an integer.
 */

/** Largest magnitude below which every integer is a double; beyond it an integer needs a bigint. */
export const EXACT_INTEGER_LIMIT = 2 ** 53;

/** Python (3.11+) refuses to convert an int of more digits to text, so `json.dumps` cannot write it. */
export const MAX_INTEGER_DIGITS = 4300;

/** A float with an integral value (`1.0`); `valueOf` lets arithmetic use it as the number it is. */
export class JsonFloat {
  constructor(readonly value: number) {}

  valueOf(): number {
    return this.value;
  }

  /** What `JSON.stringify` writes: the number (it cannot write `1.0`). */
  toJSON(): number {
    return this.value;
  }
}

/** Thrown for a number token no Python `json.dumps` could write back. */
export class JsonNumberError extends Error {
  override readonly name = "JsonNumberError";
}

const isExactInteger = (n: number): boolean => Number.isInteger(n) && Math.abs(n) <= EXACT_INTEGER_LIMIT;

/** A float value in its exact form: a `JsonFloat` where a plain number would read as an integer. */
export function exactFloat(n: number): number | JsonFloat {
  return isExactInteger(n) ? new JsonFloat(n) : n;
}

/**
 * The value of one JSON number token (already known to be valid JSON syntax) in its exact form.
 * Throws JsonNumberError for a float beyond the double range and an integer of more than 4300 digits.
 */
export function parseJsonNumber(token: string): number | bigint | JsonFloat {
  if (/[.eE]/.test(token)) {
    const n = Number(token);
    if (!Number.isFinite(n)) throw new JsonNumberError(`${token} is beyond the range of a float (JSON has no Infinity)`);
    return exactFloat(n);
  }
  if (token.length <= 15) return Number(token); // at most 15 digits: exact as a double
  const digits = token.startsWith("-") ? token.length - 1 : token.length;
  if (digits > MAX_INTEGER_DIGITS)
    throw new JsonNumberError(`an integer of ${digits} digits exceeds ${MAX_INTEGER_DIGITS} digits, the most Python writes as text`);
  const big = BigInt(token);
  return big <= BigInt(EXACT_INTEGER_LIMIT) && big >= -BigInt(EXACT_INTEGER_LIMIT) ? Number(big) : big;
}

/** How many decimal digits a non-negative safe integer has, without writing it. */
export function decimalDigits(n: number): number {
  let digits = 1;
  let rest = n;
  for (; rest >= 2 ** 31; rest = Math.floor(rest / 10)) digits++;
  for (; rest >= 10; rest = (rest / 10) | 0) digits++; // integer division, several times faster
  return digits;
}

/** Python's `repr(float)`: shortest round-trip digits, scientific below 1e-4 and from 1e16, `.0` when integral. */
export function pythonFloatRepr(n: number): string {
  if (n === 0) return Object.is(n, -0) ? "-0.0" : "0.0";
  const a = Math.abs(n);
  if (a < 1e-4 || a >= 1e16) return n.toExponential().replace(/e([+-])(\d)$/, "e$10$2"); // exponent of at least two digits
  const fixed = String(n); // JS writes fixed notation from 1e-7 to 1e21
  return fixed.includes(".") ? fixed : `${fixed}.0`;
}

/** A `number` as canonical JSON writes it (finite only): see the module comment. */
export function formatNumber(n: number): string {
  return isExactInteger(n) ? String(n) : pythonFloatRepr(n); // String(-0) is "0"
}

/** A `bigint` as canonical JSON writes it; throws JsonNumberError past Python's digit limit. */
export function formatBigInt(n: bigint): string {
  const text = n.toString();
  const digits = n < 0n ? text.length - 1 : text.length;
  if (digits > MAX_INTEGER_DIGITS)
    throw new JsonNumberError(`an integer of ${digits} digits exceeds ${MAX_INTEGER_DIGITS} digits, the most Python writes as text`);
  return text;
}

/**
 * The value as plain JS numbers, for consumers that only know `number` (JSON Schema validation):
 * a bigint becomes the nearest double, a JsonFloat its number. Returns `value` itself when nothing changes.
 */
export function toPlainNumbers(value: unknown): unknown {
  if (typeof value === "bigint") return Number(value);
  if (value instanceof JsonFloat) return value.value;
  if (typeof value !== "object" || value === null) return value;
  if (Array.isArray(value)) {
    let copy: unknown[] | undefined;
    value.forEach((item, i) => {
      const plain = toPlainNumbers(item);
      if (plain !== item) (copy ??= [...value])[i] = plain;
    });
    return copy ?? value;
  }
  let copy: Record<string, unknown> | undefined;
  for (const [key, item] of Object.entries(value)) {
    const plain = toPlainNumbers(item);
    if (plain !== item) (copy ??= { ...value })[key] = plain;
  }
  return copy ?? value;
}
