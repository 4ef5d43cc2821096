/**
 * Canonical compact JSON: the text docs/protocol.md section 5 measures, byte for byte the UTF-8 output of Python's
 * `json.dumps(v, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False)`.
 *
 * Strings: `\" \\ \b \f \n \r \t`, other controls as lowercase `\u00XX`, everything else raw (DEL, U+2028,
 * CJK, emoji); a lone surrogate, which UTF-8 cannot carry, is written as its `\udXXX` escape.
 * Keys are sorted by code point, as Python sorts `str` (UTF-16 order differs above U+D7FF).
 *
 * Numbers are exact (json-numbers.ts): a `number` is an integer up to 2**53 and a float beyond or when not
 * integral, written as Python's `repr(float)`; a `bigint` is an integer of any size (up to 4300 digits); a
 * `JsonFloat` a float that a `number` would make an integer (`1.0`, `-0.0`).
 *
 * The writer emits UTF-8 straight into a growing byte buffer: string concatenation and a final
 * `Buffer.byteLength` cost several times `JSON.stringify` in garbage alone, and this is the hot path.
 */

import { EXACT_INTEGER_LIMIT, JsonFloat, JsonNumberError, decimalDigits, formatBigInt, formatNumber, pythonFloatRepr } from "./json-numbers.js";

/** Deepest nesting of arrays/objects written, about what CPython's own recursion limit allows. */
export const MAX_NESTING_DEPTH = 1000;

/**
 * Levels the gateway may wrap around a result when it emits it (`context_preview.result` inside a
 * history item inside its reply); a result is accepted only this much shallower than MAX_NESTING_DEPTH,
 * so that everything the engine emits can be written too.
 */
export const RESULT_ENVELOPE_DEPTH = 8;
export const MAX_RESULT_DEPTH = MAX_NESTING_DEPTH - RESULT_ENVELOPE_DEPTH;

/** A value that has no canonical JSON form. `path` is a JSONPath such as `$.data.items[3]`. */
export class CanonicalJsonError extends Error {
  override readonly name = "CanonicalJsonError";
  constructor(
    readonly path: string,
    readonly reason: string,
  ) {
    super(`${reason} at ${path}`);
  }
}

/** Thrown deep inside the writer; the path is collected while the stack unwinds, so the hot path tracks none. */
class Failure {
  readonly segments: (string | number)[] = [];
  readonly containers: object[] = [];
  constructor(readonly reason: string) {}
}

export const isHighSurrogate = (u: number): boolean => u >= 0xd800 && u <= 0xdbff;
export const isLowSurrogate = (u: number): boolean => u >= 0xdc00 && u <= 0xdfff;

/** Compares two strings by Unicode code point, as Python compares `str`. */
function compareCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  if (i === n) return a.length - b.length;
  // Step back onto a shared high surrogate so that both sides read whole code points.
  if (i > 0 && isHighSurrogate(a.charCodeAt(i - 1)) && (isLowSurrogate(a.charCodeAt(i)) || isLowSurrogate(b.charCodeAt(i)))) i--;
  return (a.codePointAt(i) ?? 0) - (b.codePointAt(i) ?? 0);
}

// UTF-16 order equals code point order unless a key has a code unit from U+D800 up.
const HIGH_UNITS = /[\ud800-\uffff]/;

/** Sorts keys in place by code point; the native sort suffices unless a key reaches above U+D7FF. */
export function sortKeys(keys: string[]): string[] {
  if (keys.length < 2) return keys;
  keys.sort();
  return keys.some((k) => HIGH_UNITS.test(k)) ? keys.sort(compareCodePoints) : keys;
}

/** Plain objects only: a Date, Map or class instance has no JSON form Python would agree on. */
function isPlainObject(v: object): boolean {
  const proto: unknown = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

const HEX = "0123456789abcdef";
const UNICODE_ESCAPE = 0x75; // `u`
/**
 * Per ASCII code: 0 when written as is, else the letter after the backslash: the two-character escapes
 * Python uses (`\" \\ \b \f \n \r \t`), `u` (`\u00XX`) for the other controls.
 */
const ASCII_ESCAPES = new Uint8Array(0x80);
ASCII_ESCAPES.fill(UNICODE_ESCAPE, 0, 0x20);
for (const [c, letter] of [
  [0x22, 0x22],
  [0x5c, 0x5c],
  [0x08, 0x62],
  [0x0c, 0x66],
  [0x0a, 0x6e],
  [0x0d, 0x72],
  [0x09, 0x74],
] as const)
  ASCII_ESCAPES[c] = letter;

// A string at least this long that has no escape and no surrogate is encoded natively; for shorter ones
// the test costs more than it saves.
const NATIVE_ENCODE_MIN_LENGTH = 64;
// eslint-disable-next-line no-control-regex -- the control characters are what JSON must escape
const NEEDS_LOOP = /[\u0000-\u001f"\\\ud800-\udfff]/;
const utf8Encoder = new TextEncoder();

// One buffer kept between measurements, so that neither the many small ones of a projection nor the
// repeated large ones allocate and grow it again; one beyond the cap is left to the garbage collector.
const SPARE_BUFFER_CAP = 4 << 20;
let spareBuffer: Uint8Array | undefined;

/**
 * A byte buffer whose contents are not zeroed first (several MiB for a large result): only the bytes
 * written are ever read. A plain Uint8Array over the Buffer's memory, whose `slice` copies as expected.
 */
function uninitialized(size: number): Uint8Array {
  const b = Buffer.allocUnsafeSlow(size);
  return new Uint8Array(b.buffer, b.byteOffset, size);
}

/** The keys of an object in producer order, sorted, and (once seen twice) encoded as `"key":`. */
interface Shape {
  readonly keys: readonly string[];
  readonly sorted: readonly string[];
  encoded: Uint8Array[] | undefined;
}

/** Whether two key lists are equal, in order: objects of one shape. */
export function sameKeys(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

// Python's repr(float) is fixed notation from 1e-4 below 1e16, JS's String from 1e-7 below 1e21: between
// 1e-4 and 1e16 a float that is not integral is spelled alike (see pythonFloatRepr).
const FIXED_FLOAT_MIN = 1e-4;
const FIXED_FLOAT_MAX = 1e16;

/** A JsonFloat's value, which must be a finite float. */
function floatText(n: number): string {
  if (!Number.isFinite(n)) throw new JsonNumberError(`${n} is not allowed (JSON has no NaN or Infinity)`);
  return pythonFloatRepr(n);
}

/** A number's text, its JsonNumberError turned into a Failure that collects the path. */
function checkedNumber(format: () => string): string {
  try {
    return format();
  } catch (err) {
    if (err instanceof JsonNumberError) throw new Failure(err.message);
    throw err;
  }
}

/** How deep the value may nest, and whether members whose value is `undefined` are left out (as JSON.stringify does). */
interface WriteOptions {
  readonly maxDepth: number;
  readonly omitUndefined: boolean;
}
const STRICT: WriteOptions = { maxDepth: MAX_NESTING_DEPTH, omitUndefined: false };

/** "00" to "99" as ASCII: digits are written two at a time. */
const DIGIT_PAIRS = Uint8Array.from({ length: 200 }, (_, i) => 0x30 + (i % 2 === 0 ? Math.floor(i / 20) : (i >> 1) % 10));

/** Writes the last `count` decimal digits of `n` (below 2**31) at `p`, zero-padded; returns the end. */
function writeDigits(b: Uint8Array, p: number, n: number, count: number): number {
  let k = p + count;
  for (; k - p >= 2; k -= 2) {
    const pair = (n % 100) * 2;
    n = (n / 100) | 0;
    b[k - 2] = DIGIT_PAIRS[pair] as number;
    b[k - 1] = DIGIT_PAIRS[pair + 1] as number;
  }
  if (k > p) b[p] = 0x30 + (n % 10);
  return p + count;
}

class Utf8JsonWriter {
  private buf: Uint8Array;
  private pos = 0;
  // Per depth, the last object shape seen: arrays of like objects sort and encode their keys once.
  private readonly shapes: (Shape | undefined)[] = [];

  // The buffer this writer started with, given back even when a larger one replaced it.
  private readonly first: Uint8Array;

  constructor(private readonly options: WriteOptions) {
    this.buf = this.first = spareBuffer ?? uninitialized(1 << 16);
    spareBuffer = undefined; // taken; a re-entrant measurement (from a getter) allocates its own
  }

  /** The bytes written so far, valid until release(). */
  bytes(): Uint8Array {
    return this.buf.subarray(0, this.pos);
  }

  /** Gives the buffer back for reuse: the last one, or, beyond the cap, the first. */
  release(): void {
    spareBuffer = this.buf.length <= SPARE_BUFFER_CAP ? this.buf : this.first;
  }

  private reserve(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (this.pos + n > size) size *= 2;
    const grown = uninitialized(size);
    grown.set(this.buf.subarray(0, this.pos));
    this.buf = grown;
  }

  private byte(b: number): void {
    if (this.pos === this.buf.length) this.reserve(1);
    this.buf[this.pos++] = b;
  }

  private raw(bytes: Uint8Array): void {
    this.reserve(bytes.length);
    const b = this.buf;
    let p = this.pos;
    for (let i = 0; i < bytes.length; i++) b[p++] = bytes[i] as number;
    this.pos = p;
  }

  /** `"key":`, copied out of the buffer for reuse. */
  private encodedKey(key: string): Uint8Array {
    const start = this.pos;
    this.string(key);
    this.byte(0x3a);
    const bytes = this.buf.slice(start, this.pos);
    this.pos = start;
    return bytes;
  }

  private ascii(s: string): void {
    this.reserve(s.length);
    const b = this.buf;
    let p = this.pos;
    for (let i = 0; i < s.length; i++) b[p++] = s.charCodeAt(i);
    this.pos = p;
  }

  /** A safe integer's digits without allocating a string: the common number in tool results. */
  private integer(n: number): void {
    this.reserve(17);
    const b = this.buf;
    let p = this.pos;
    if (n < 0) {
      b[p++] = 0x2d;
      n = -n;
    }
    // Two halves below 2**31 each, so that the digits come from integer arithmetic.
    const high = Math.floor(n / 1e8);
    const low = n - high * 1e8;
    if (high > 0) p = writeDigits(b, writeDigits(b, p, high, decimalDigits(high)), low, 8);
    else p = writeDigits(b, p, low, decimalDigits(low));
    this.pos = p;
  }

  string(s: string): void {
    const n = s.length;
    // UTF-8 takes at most 3 bytes per UTF-16 unit; only an escape (up to 6) needs more, checked where one is met.
    this.reserve(n * 3 + 2);
    let b = this.buf;
    let p = this.pos;
    b[p++] = 0x22;
    if (n >= NATIVE_ENCODE_MIN_LENGTH && !NEEDS_LOOP.test(s)) {
      // Nothing to escape and no surrogate that could be lone: plain UTF-8, which the native encoder writes faster.
      p += utf8Encoder.encodeInto(s, b.subarray(p)).written;
      b[p++] = 0x22;
      this.pos = p;
      return;
    }
    for (let i = 0; i < n; i++) {
      const c = s.charCodeAt(i);
      if (c < 0x80) {
        const escape = ASCII_ESCAPES[c] as number;
        if (escape === 0) {
          b[p++] = c;
          continue;
        }
        if (p + (n - i) * 3 + 4 > b.length) b = this.grown(p, (n - i) * 6 + 1);
        b[p++] = 0x5c;
        b[p++] = escape;
        if (escape === UNICODE_ESCAPE) {
          b[p++] = 0x30;
          b[p++] = 0x30;
          b[p++] = HEX.charCodeAt(c >> 4);
          b[p++] = HEX.charCodeAt(c & 15);
        }
      } else if (c < 0x800) {
        b[p++] = 0xc0 | (c >> 6);
        b[p++] = 0x80 | (c & 63);
      } else if (c < 0xd800 || c > 0xdfff) {
        b[p++] = 0xe0 | (c >> 12);
        b[p++] = 0x80 | ((c >> 6) & 63);
        b[p++] = 0x80 | (c & 63);
      } else if (isHighSurrogate(c) && i + 1 < n && isLowSurrogate(s.charCodeAt(i + 1))) {
        const cp = ((c - 0xd800) << 10) + (s.charCodeAt(++i) - 0xdc00) + 0x10000;
        b[p++] = 0xf0 | (cp >> 18);
        b[p++] = 0x80 | ((cp >> 12) & 63);
        b[p++] = 0x80 | ((cp >> 6) & 63);
        b[p++] = 0x80 | (cp & 63);
      } else {
        if (p + (n - i) * 3 + 4 > b.length) b = this.grown(p, (n - i) * 6 + 1);
        b[p++] = 0x5c;
        b[p++] = UNICODE_ESCAPE;
        for (let shift = 12; shift >= 0; shift -= 4) b[p++] = HEX.charCodeAt((c >> shift) & 15);
      }
    }
    b[p++] = 0x22;
    this.pos = p;
  }

  /** The buffer with room for `n` more bytes after `p`, the bytes up to `p` kept (for string()'s local cursor). */
  private grown(p: number, n: number): Uint8Array {
    this.pos = p;
    this.reserve(n);
    return this.buf;
  }

  value(v: unknown, depth: number): void {
    switch (typeof v) {
      case "string":
        return this.string(v);
      case "number": {
        const a = Math.abs(v);
        if (Number.isInteger(v)) {
          if (a <= EXACT_INTEGER_LIMIT) return this.integer(v);
        } else if (a >= FIXED_FLOAT_MIN && a < FIXED_FLOAT_MAX) {
          return this.ascii(String(v)); // a float whose fixed notation JS and Python spell alike
        }
        if (!Number.isFinite(v)) throw new Failure(`${v} is not allowed (JSON has no NaN or Infinity)`);
        return this.ascii(formatNumber(v));
      }
      case "bigint":
        return this.ascii(checkedNumber(() => formatBigInt(v)));
      case "boolean":
        return this.ascii(v ? "true" : "false");
      case "object":
        if (v === null) return this.ascii("null");
        if (v instanceof JsonFloat) return this.ascii(checkedNumber(() => floatText(v.value)));
        if (depth >= this.options.maxDepth) throw new Failure(`nesting deeper than ${this.options.maxDepth} levels`);
        return Array.isArray(v) ? this.array(v, depth + 1) : this.object(v, depth + 1);
      default:
        throw new Failure(`${typeof v} is not a JSON value`);
    }
  }

  private array(a: readonly unknown[], depth: number): void {
    this.byte(0x5b);
    let i = 0;
    try {
      for (; i < a.length; i++) {
        if (i > 0) this.byte(0x2c);
        this.value(a[i], depth);
      }
    } catch (err) {
      throw unwound(err, i, a);
    }
    this.byte(0x5d);
  }

  private object(o: object, depth: number): void {
    if (!isPlainObject(o)) throw new Failure(`${o.constructor?.name ?? "exotic"} object is not a plain JSON object`);
    const { sorted: keys, encoded } = this.shapeOf(o, depth);
    this.byte(0x7b);
    const start = this.pos;
    let key = "";
    try {
      for (let i = 0; i < keys.length; i++) {
        key = keys[i] as string;
        const member = (o as Record<string, unknown>)[key];
        if (member === undefined && this.options.omitUndefined) continue;
        if (this.pos !== start) this.byte(0x2c);
        if (encoded !== undefined) {
          this.raw(encoded[i] as Uint8Array);
        } else {
          this.string(key);
          this.byte(0x3a);
        }
        this.value(member, depth);
      }
    } catch (err) {
      throw unwound(err, key, o);
    }
    this.byte(0x7d);
  }

  private shapeOf(o: object, depth: number): Shape {
    const keys = Object.keys(o);
    const last = this.shapes[depth];
    if (last !== undefined && sameKeys(last.keys, keys)) {
      last.encoded ??= last.sorted.map((k) => this.encodedKey(k));
      return last;
    }
    const shape: Shape = { keys, sorted: sortKeys([...keys]), encoded: undefined };
    this.shapes[depth] = shape;
    return shape;
  }
}

function unwound(err: unknown, segment: string | number, container: object): unknown {
  if (err instanceof Failure) {
    err.segments.push(segment);
    err.containers.push(container);
  }
  return err;
}

/** `$.a[2]["b c"]` from path segments, outermost first. */
function jsonPath(segments: readonly (string | number)[]): string {
  let path = "$";
  for (const s of segments) {
    if (typeof s === "number") path += `[${s}]`;
    else path += /^[A-Za-z_$][\w$]*$/.test(s) ? `.${s}` : `[${JSON.stringify(s)}]`;
  }
  return path;
}

function toCanonicalError(f: Failure): CanonicalJsonError {
  const segments = [...f.segments].reverse();
  const containers = [...f.containers].reverse();
  // A cycle surfaces as too deep a nesting; report the first place where it closes.
  const seen = new Set<object>();
  for (let i = 0; i < containers.length; i++) {
    const c = containers[i] as object;
    if (seen.has(c)) return new CanonicalJsonError(jsonPath(segments.slice(0, i)), "cycle: the value contains itself");
    seen.add(c);
  }
  return new CanonicalJsonError(jsonPath(segments), f.reason);
}

function written(value: unknown, options: WriteOptions): Utf8JsonWriter {
  const writer = new Utf8JsonWriter(options);
  try {
    writer.value(value, 0);
  } catch (err) {
    writer.release();
    throw err instanceof Failure ? toCanonicalError(err) : err;
  }
  return writer;
}

/** Runs `use` on the canonical bytes of a value without copying them; `use` must not keep them. */
export function withCanonicalJson<T>(value: unknown, use: (bytes: Uint8Array) => T, options: WriteOptions = STRICT): T {
  const writer = written(value, options);
  try {
    return use(writer.bytes());
  } finally {
    writer.release();
  }
}

/** Like withCanonicalJson for a tool result: nested at most MAX_RESULT_DEPTH, so that its envelopes fit too. */
export function withCanonicalResult<T>(result: unknown, use: (bytes: Uint8Array) => T): T {
  return withCanonicalJson(result, use, { maxDepth: MAX_RESULT_DEPTH, omitUndefined: false });
}

/** The canonical compact JSON of a value as UTF-8 bytes. Throws CanonicalJsonError for values JSON cannot carry. */
export function encodeCanonicalJson(value: unknown): Uint8Array {
  return withCanonicalJson(value, (bytes) => bytes.slice());
}

/**
 * JSON text for what toolgate writes out (HTTP replies, events, the ToolRunner's store): canonical JSON with
 * members whose value is `undefined` left out, as JSON.stringify leaves them. Numbers stay exact, and a
 * stored projection is served in the bytes it was measured in.
 */
export function toJsonText(value: unknown): string {
  return withCanonicalJson(value, decodeUtf8, { maxDepth: MAX_NESTING_DEPTH, omitUndefined: true });
}

const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }); // a U+FEFF may start a tail

/** UTF-8 bytes (of canonical JSON, so always well-formed) as a string. */
export function decodeUtf8(bytes: Uint8Array): string {
  return decoder.decode(bytes);
}

/** The canonical compact JSON text of a value. */
export function canonicalJson(value: unknown): string {
  return withCanonicalJson(value, decodeUtf8);
}

/** UTF-8 byte length of the canonical compact JSON text: the size the context budget measures. */
export function compactByteLength(value: unknown): number {
  return withCanonicalJson(value, (bytes) => bytes.length);
}
