/**
 * Canonical compact JSON: the text docs/protocol.md section 5 measures, byte for byte the UTF-8 output of Python's
 * `json.dumps(v, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False)`.
 *
 * Strings: `\" \\ \b \f \n \r \t`, other controls as lowercase `\u00XX`, everything else raw (DEL, U+2028,
 * CJK, emoji); a lone surrogate, which UTF-8 cannot carry, is written as its `\udXXX` escape.
 * Keys are sorted by code point, as Python sorts `str` (UTF-16 order differs above U+D7FF).
 *
 * Numbers: JS has one number type where Python has `int` and `float`, so the source's distinction is gone.
 * - integral values below 1e21 are written as integer digits, as Python writes an `int` (beyond 2**53 the
 *   double has lost the low digits: JS writes zeros there, which keeps the length but not the digits);
 * - every other finite value as Python's `repr(float)`: shortest round-trip digits, fixed notation except
 *   scientific below 1e-4 and from 1e21 on, exponent with at least two digits (`1e-05`, `1e+21`);
 * - `-0` is written `0`.
 * So only values Python holds as integral floats differ: `1.0` is written `1`, `1e16` `10000000000000000`.
 *
 * The writer emits UTF-8 straight into a growing byte buffer: string concatenation and a final
 * `Buffer.byteLength` cost several times `JSON.stringify` in garbage alone, and this is the hot path.
 */

/** Deepest nesting of arrays/objects accepted, about what CPython's own recursion limit allows. */
export const MAX_NESTING_DEPTH = 1000;

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

/** A finite number as Python writes it (see the module comment). */
export function formatNumber(n: number): string {
  if (Number.isInteger(n) || Math.abs(n) >= 1e-4) return String(n); // String(-0) is "0"
  return n.toExponential().replace(/e-(\d)$/, "e-0$1");
}

const HEX = "0123456789abcdef";
// Two-character escapes Python uses; other controls get \u00XX.
const SHORT_ESCAPES: Record<number, number> = { 0x22: 0x22, 0x5c: 0x5c, 0x08: 0x62, 0x0c: 0x66, 0x0a: 0x6e, 0x0d: 0x72, 0x09: 0x74 };

// One buffer kept between measurements, so that neither the many small ones of a projection nor the
// repeated large ones allocate and grow it again; one beyond the cap is left to the garbage collector.
const SPARE_BUFFER_CAP = 4 << 20;
let spareBuffer: Uint8Array | undefined;

/** The keys of an object in producer order, sorted, and (once seen twice) encoded as `"key":`. */
interface Shape {
  readonly keys: readonly string[];
  readonly sorted: readonly string[];
  encoded: Uint8Array[] | undefined;
}

function sameKeys(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

class Utf8JsonWriter {
  private buf: Uint8Array;
  private pos = 0;
  // Per depth, the last object shape seen: arrays of like objects sort and encode their keys once.
  private readonly shapes: (Shape | undefined)[] = [];

  constructor() {
    this.buf = spareBuffer ?? new Uint8Array(1 << 16);
    spareBuffer = undefined; // taken; a re-entrant measurement (from a getter) allocates its own
  }

  /** The bytes written so far, valid until release(). */
  bytes(): Uint8Array {
    return this.buf.subarray(0, this.pos);
  }

  /** Gives the buffer back for reuse. */
  release(): void {
    if (this.buf.length <= SPARE_BUFFER_CAP) spareBuffer = this.buf;
  }

  private reserve(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (this.pos + n > size) size *= 2;
    const grown = new Uint8Array(size);
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
    for (let i = 0; i < bytes.length; i++) b[this.pos++] = bytes[i] as number;
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
    for (let i = 0; i < s.length; i++) this.buf[this.pos++] = s.charCodeAt(i);
  }

  /** Integer digits without allocating a string; the common number in tool results. */
  private smallInt(n: number): void {
    this.reserve(11);
    const b = this.buf;
    if (n < 0) {
      b[this.pos++] = 0x2d;
      n = -n;
    }
    let scale = 1;
    while (scale * 10 <= n) scale *= 10;
    for (; scale >= 1; scale /= 10) {
      const digit = Math.floor(n / scale);
      b[this.pos++] = 0x30 + digit;
      n -= digit * scale;
    }
  }

  string(s: string): void {
    const n = s.length;
    this.reserve(n * 6 + 2); // worst case: every unit a \u00XX escape
    const b = this.buf;
    let p = this.pos;
    b[p++] = 0x22;
    for (let i = 0; i < n; i++) {
      const c = s.charCodeAt(i);
      if (c < 0x80) {
        if (c >= 0x20 && c !== 0x22 && c !== 0x5c) {
          b[p++] = c;
          continue;
        }
        b[p++] = 0x5c;
        const short = SHORT_ESCAPES[c];
        if (short !== undefined) {
          b[p++] = short;
        } else {
          b[p++] = 0x75;
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
        b[p++] = 0x5c;
        b[p++] = 0x75;
        for (let shift = 12; shift >= 0; shift -= 4) b[p++] = HEX.charCodeAt((c >> shift) & 15);
      }
    }
    b[p++] = 0x22;
    this.pos = p;
  }

  value(v: unknown, depth: number): void {
    switch (typeof v) {
      case "string":
        return this.string(v);
      case "number":
        if (!Number.isFinite(v)) throw new Failure(`${v} is not allowed (JSON has no NaN or Infinity)`);
        if (Number.isInteger(v) && Math.abs(v) < 2 ** 31) return this.smallInt(v);
        return this.ascii(formatNumber(v));
      case "boolean":
        return this.ascii(v ? "true" : "false");
      case "object":
        if (v === null) return this.ascii("null");
        if (depth >= MAX_NESTING_DEPTH) throw new Failure(`nesting deeper than ${MAX_NESTING_DEPTH} levels`);
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
    let key = "";
    try {
      for (let i = 0; i < keys.length; i++) {
        key = keys[i] as string;
        if (i > 0) this.byte(0x2c);
        if (encoded !== undefined) {
          this.raw(encoded[i] as Uint8Array);
        } else {
          this.string(key);
          this.byte(0x3a);
        }
        this.value((o as Record<string, unknown>)[key], depth);
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

function written(value: unknown): Utf8JsonWriter {
  const writer = new Utf8JsonWriter();
  try {
    writer.value(value, 0);
  } catch (err) {
    throw err instanceof Failure ? toCanonicalError(err) : err;
  }
  return writer;
}

/** Runs `use` on the canonical bytes of a value without copying them; `use` must not keep them. */
export function withCanonicalJson<T>(value: unknown, use: (bytes: Uint8Array) => T): T {
  const writer = written(value);
  try {
    return use(writer.bytes());
  } finally {
    writer.release();
  }
}

/** The canonical compact JSON of a value as UTF-8 bytes. Throws CanonicalJsonError for values JSON cannot carry. */
export function encodeCanonicalJson(value: unknown): Uint8Array {
  return withCanonicalJson(value, (bytes) => bytes.slice());
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
