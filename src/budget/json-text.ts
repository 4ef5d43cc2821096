/**
 * JSON text read with exact numbers (see json-numbers.ts): what `measure`, the HTTP bodies that carry a
 * product's values and the ToolRunner's store parse with. Duplicate keys keep the last value, as Python's
 * `json` module and `JSON.parse` do. Text without a float and without an integer of 16 digits or more
 * (most of it) is read by `JSON.parse`, which is exact there and several times faster than a lossless parser.
 */
import { parse } from "lossless-json";
import { z } from "zod";
import { MAX_NESTING_DEPTH } from "./canonical-json.js";
import { jsonTextTooDeep } from "../validation/json-depth.js";
import { JsonNumberError, parseJsonNumber } from "./json-numbers.js";

// A number token opens the text or follows `:`, `,` or `[` (whitespace between). A float has a digit
// followed by `.`, `e` or `E`; an integer JSON.parse may round has 16+ digits. Checking the token's start
// keeps strings out: a hex digest ("…3e…") or an id is no number. A string that does hold such a
// sequence after one of those characters (rare) only sends the text to the slower exact parser, still right.
const INEXACT_FOR_JSON_PARSE = /(?:^|[:,[])\s*-?(?:\d+[.eE]|\d{16})/;

/**
 * Parses JSON text keeping every number exact. Throws a SyntaxError for text that is not JSON, a
 * JsonNumberError for a number Python could not write back, and a RangeError for nesting deeper than
 * MAX_NESTING_DEPTH (canonical JSON could not write it either).
 */
export function parseExactJson(text: string): unknown {
  if (!INEXACT_FOR_JSON_PARSE.test(text)) return JSON.parse(text);
  // The exact parser recurses: refuse what canonical JSON could not write anyway.
  if (jsonTextTooDeep(text, MAX_NESTING_DEPTH)) throw new RangeError(`nesting deeper than ${MAX_NESTING_DEPTH} levels`);
  // A float beyond the double range is refused only if it survives: Python reads it as inf and fails
  // only on writing, and a duplicate key's later value replaces it (`{"a":1e400,"a":1}` is fine).
  let unwritable = 0;
  const parseNumber = (token: string) => {
    try {
      return parseJsonNumber(token);
    } catch (err) {
      // Python refuses an over-long integer while reading (its digit limit), so only floats wait.
      if (!(err instanceof JsonNumberError) || !/[.eE]/.test(token)) throw err;
      unwritable++;
      return new Unwritable(err);
    }
  };
  const value: unknown = parse(text, null, { parseNumber, onDuplicateKey: ({ newValue }) => newValue });
  if (unwritable > 0) refuseUnwritable(value);
  return value;
}

/** A float token beyond the double range, kept until duplicate keys are resolved. */
class Unwritable {
  constructor(readonly error: JsonNumberError) {}
}

function refuseUnwritable(value: unknown): void {
  if (value instanceof Unwritable) throw value.error;
  if (Array.isArray(value)) for (const item of value) refuseUnwritable(item);
  else if (value !== null && typeof value === "object" && Object.getPrototypeOf(value) === Object.prototype)
    for (const item of Object.values(value)) refuseUnwritable(item);
}

/**
 * A JSON value with exact numbers (bigint and JsonFloat allowed, which `z.json()` refuses). Whether it is
 * representable at all (no NaN, no cycle) is checked where it is measured; parsed JSON text always is.
 */
export const jsonValueSchema = z.custom<unknown>((v) => v !== undefined, { message: "a JSON value is required" });
