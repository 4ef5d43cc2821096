/**
 * Head and tail cuts of a string under a byte allowance, where a character costs what it takes written
 * inside a canonical JSON string literal (see canonical-json.ts): escaping counts. Cuts fall on code point
 * boundaries only, so a surrogate pair is never split; a lone surrogate is a code point of its own.
 * Each cut is one linear scan bounded by the allowance (at most 32 KiB), never by the string's length.
 *
 * The same cuts of canonical JSON text are taken on its UTF-8 bytes, without decoding it: that text has
 * no raw control character and no lone surrogate, so a character costs its UTF-8 length, and one more
 * for `"` and `\`.
 */
import { isHighSurrogate, isLowSurrogate } from "./canonical-json.js";

/** Where a cut ends (head) or starts (tail), what it costs escaped, and its UTF-8 length. */
export interface Cut {
  readonly index: number;
  readonly cost: number;
  readonly utf8: number;
}

/** Escaped cost of one BMP code unit that is not part of a pair. */
function unitCost(c: number): number {
  if (c < 0x20) return c === 0x08 || c === 0x09 || c === 0x0a || c === 0x0c || c === 0x0d ? 2 : 6; // \n or \u00XX
  if (c < 0x80) return c === 0x22 || c === 0x5c ? 2 : 1;
  if (c < 0x800) return 2;
  return c >= 0xd800 && c <= 0xdfff ? 6 : 3; // a lone surrogate is written \udXXX
}

/** UTF-8 length of one BMP code unit that is not part of a pair (a lone surrogate as U+FFFD, like Buffer). */
const unitUtf8 = (c: number): number => (c < 0x80 ? 1 : c < 0x800 ? 2 : 3);

/** The longest prefix of `s` whose escaped cost is at most `room`. */
export function takeHead(s: string, room: number): Cut {
  return scan(s, room, true, 0);
}

/** The longest suffix of `s` starting at or after `floor` whose escaped cost is at most `room`. */
export function takeTail(s: string, room: number, floor = 0): Cut {
  return scan(s, room, false, floor);
}

/** The escaped cost of the whole string: its canonical JSON literal without the quotes. */
export function escapedLength(s: string): number {
  let cost = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80 && c >= 0x20 && c !== 0x22 && c !== 0x5c)
      cost++; // the common case, first
    else if (!isHighSurrogate(c) || i + 1 === s.length || !isLowSurrogate(s.charCodeAt(i + 1))) cost += unitCost(c);
    else {
      cost += 4; // a pair: one code point of 4 UTF-8 bytes
      i++;
    }
  }
  return cost;
}

function scan(s: string, room: number, forward: boolean, floor: number): Cut {
  let i = forward ? 0 : s.length;
  let cost = 0;
  let utf8 = 0;
  while (forward ? i < s.length : i > floor) {
    const c = s.charCodeAt(forward ? i : i - 1);
    const pair = forward
      ? isHighSurrogate(c) && i + 1 < s.length && isLowSurrogate(s.charCodeAt(i + 1))
      : isLowSurrogate(c) && i - 2 >= floor && isHighSurrogate(s.charCodeAt(i - 2));
    const k = pair ? 4 : unitCost(c);
    if (cost + k > room) break;
    const units = pair ? 2 : 1;
    i += forward ? units : -units;
    cost += k;
    utf8 += pair ? 4 : unitUtf8(c);
  }
  return { index: i, cost, utf8 };
}

/** Length of the UTF-8 character that starts with byte `lead`. */
const utf8Length = (lead: number): number => (lead < 0x80 ? 1 : lead < 0xe0 ? 2 : lead < 0xf0 ? 3 : 4);

/** What writing byte `b` of canonical JSON inside a string literal adds to its length: `"` and `\` are escaped. */
const escapeExtra = (b: number): number => (b === 0x22 || b === 0x5c ? 1 : 0);

/** The longest prefix of canonical JSON bytes whose escaped cost is at most `room`; `index` is its end byte. */
export function takeHeadOfCanonical(bytes: Uint8Array, room: number): Cut {
  let i = 0;
  let cost = 0;
  while (i < bytes.length) {
    const lead = bytes[i] as number;
    const length = utf8Length(lead);
    const k = length + escapeExtra(lead);
    if (cost + k > room) break;
    cost += k;
    i += length;
  }
  return { index: i, cost, utf8: i };
}

/**
 * The longest suffix of canonical JSON bytes starting at or after the character boundary `floor` whose
 * escaped cost is at most `room`; `index` is its first byte.
 */
export function takeTailOfCanonical(bytes: Uint8Array, room: number, floor: number): Cut {
  let i = bytes.length;
  let cost = 0;
  while (i > floor) {
    let start = i - 1;
    while (start > floor && ((bytes[start] as number) & 0xc0) === 0x80) start--; // back to the lead byte
    const k = i - start + escapeExtra(bytes[start] as number);
    if (cost + k > room) break;
    cost += k;
    i = start;
  }
  return { index: i, cost, utf8: bytes.length - i };
}

/** Escaped cost of canonical JSON bytes [from, to), both character boundaries. */
export function canonicalCost(bytes: Uint8Array, from: number, to: number): number {
  let cost = to - from;
  for (let i = from; i < to; i++) cost += escapeExtra(bytes[i] as number);
  return cost;
}
