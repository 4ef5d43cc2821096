/**
 * `preserved_fields` of a projection: short fields of the original that the model needs to go on when the
 * structure around them is cut: the paths the tool asks for, then pagination, then status, then ids.
 *
 * Rules:
 * - a path joins its segments with `.`; an array index is a segment in decimal (`items.0.id`); a key
 *   containing `.` would make paths ambiguous, so it and everything below it are never found;
 * - the tool's requested paths (`preserve_fields`, up to PRESERVED_PATH_MAX_SEGMENTS segments) come first,
 *   in the tool's order; each must name a scalar (null, boolean, number, string of at most 128 UTF-8 bytes);
 * - then candidates found at depth ≤ 3 by their key, in classes of value to the model: pagination
 *   (CURSOR_KEYS: `next_cursor`, `has_more`, `total`...), then status (STATE_KEYS: `status`, `error`...),
 *   then ids (`id`, `*_id`); inside a class the shorter entry (in UTF-16 units) first, then the shallower, then canonical order;
 * - each field is kept when its entry still fits `maxBytes` (the compact JSON of the whole map), else
 *   skipped so that a shorter one behind it may still fit;
 * - the map is built in canonical key order, the order in which it is measured, stored and served.
 */
import { compactByteLength, sameKeys, sortKeys } from "./canonical-json.js";
import { escapedLength } from "./head-tail.js";
import { JsonFloat, decimalDigits } from "./json-numbers.js";

export const PRESERVED_MAX_DEPTH = 3;
export const PRESERVED_PATH_MAX_SEGMENTS = 8;
const PRESERVED_MAX_STRING_BYTES = 128;

/** Pagination: what the model needs to ask for the rest. */
export const CURSOR_KEYS: ReadonlySet<string> = new Set([
  "next_cursor",
  "cursor",
  "next_page_token",
  "page_token",
  "continuation_token",
  "next_token",
  "has_more",
  "total",
  "count",
]);

/** Status: whether it worked and what state things are in. */
export const STATE_KEYS: ReadonlySet<string> = new Set(["status", "state", "error", "code"]);

/** Every key preserved when found (besides the `*_id` ones). */
export const STATUS_KEYS: ReadonlySet<string> = new Set([...CURSOR_KEYS, ...STATE_KEYS, "id"]);

/** Any key ending in this names an id worth preserving (`task_id`, `order_id`). */
export const STATUS_KEY_SUFFIX = "_id";

export type PreservedValue = string | number | bigint | boolean | null | JsonFloat;

export const isStatusKey = (key: string): boolean => STATUS_KEYS.has(key) || key.endsWith(STATUS_KEY_SUFFIX);

/** Rank of a key's class: 0 pagination, 1 status, 2 ids. */
const classOf = (key: string): number => (CURSOR_KEYS.has(key) ? 0 : STATE_KEYS.has(key) ? 1 : 2);

/** Why a requested path is not in `preserved_fields`. */
export type UnpreservedReason = "absent" | "not_a_scalar" | "too_long" | "no_room";
export interface UnpreservedPath {
  path: string;
  reason: UnpreservedReason;
}

/** Scalars only (a JsonFloat counts as the number it is); a string of at most 128 UTF-8 bytes. */
function scalarReason(v: unknown): UnpreservedReason | undefined {
  if (typeof v === "string") return Buffer.byteLength(v, "utf8") <= PRESERVED_MAX_STRING_BYTES ? undefined : "too_long";
  const scalar = v === null || typeof v === "number" || typeof v === "bigint" || typeof v === "boolean" || v instanceof JsonFloat;
  return scalar ? undefined : "not_a_scalar";
}

/** A segment above a candidate's key: an object key, or an array index. */
type Segment = string | number;

/** A field found by its key; its path is spelled out only when it can fit. */
interface Candidate {
  /** The segments above the key, outermost first, when the key sits at depth 2 or 3. */
  readonly outer: Segment | undefined;
  readonly inner: Segment | undefined;
  readonly key: string;
  readonly value: unknown;
  /** Length of the dotted path in UTF-16 units. */
  readonly pathLength: number;
  readonly depth: number;
}

/** Bytes of a string's canonical JSON literal, counted without writing it. */
const stringBytes = (s: string): number => escapedLength(s) + 2;

/** Bytes of `"path":value,` in the compact JSON of the map. */
const entryBytes = (path: string, value: unknown): number =>
  stringBytes(path) + 1 + (typeof value === "string" ? stringBytes(value) : compactByteLength(value)) + 1;

/**
 * A lower bound of the bytes of a scalar's canonical JSON without writing it: a UTF-16 unit of a string
 * takes at least one byte; a safe integer, `true`, `false` and `null` are exact; any other number at least one.
 */
function leastValueBytes(value: unknown): number {
  if (typeof value === "string") return value.length + 2;
  if (typeof value === "number" && Number.isSafeInteger(value)) return (value < 0 ? 1 : 0) + decimalDigits(Math.abs(value));
  if (typeof value === "boolean") return value ? 4 : 5;
  return value === null ? 4 : 1;
}

/** A lower bound of entryBytes: `"path":value,` with the path's UTF-16 units as bytes. */
const leastEntryBytes = (pathLength: number, value: unknown): number => pathLength + 3 + leastValueBytes(value) + 1;

const pathOf = (c: Candidate): string => (c.outer === undefined ? c.key : c.inner === undefined ? `${c.outer}.${c.key}` : `${c.outer}.${c.inner}.${c.key}`);

/** The value at a dotted path, or undefined; only own members of plain containers are followed. */
function valueAt(root: unknown, path: string): unknown {
  let v = root;
  for (const segment of path.split(".")) {
    if (typeof v !== "object" || v === null || !Object.hasOwn(v, segment)) return undefined;
    if (Array.isArray(v) && !/^(0|[1-9][0-9]*)$/.test(segment)) return undefined;
    v = (v as Record<string, unknown>)[segment];
  }
  return v;
}

/** A string the preserved map may hold: scalarReason for strings, Buffer.byteLength only when the length cannot tell. */
const isShortString = (s: string): boolean =>
  s.length <= PRESERVED_MAX_STRING_BYTES / 3 || (s.length <= PRESERVED_MAX_STRING_BYTES && Buffer.byteLength(s, "utf8") <= PRESERVED_MAX_STRING_BYTES);

const isPreservable = (v: unknown): boolean => (typeof v === "string" ? isShortString(v) : scalarReason(v) === undefined);

/** The keys of objects of one shape worth visiting, in canonical order: status keys, and all when descending. */
interface KeyPlan {
  readonly keys: readonly string[];
  readonly status: readonly { key: string; rank: number }[];
  readonly descend: readonly string[];
}

function keyPlan(keys: string[]): KeyPlan {
  const sorted = sortKeys(keys.filter((key) => !key.includes(".")));
  return { keys, status: sorted.filter(isStatusKey).map((key) => ({ key, rank: classOf(key) })), descend: sorted };
}

/**
 * Candidates by key at depth ≤ 3, per class and sort length (path and value in UTF-16 units, any non-string
 * value as 5: the shorter are taken first), each in the order of a depth-first walk in canonical order.
 * Those whose entry cannot fit `maxBytes` even at its least are left out: they would never be measured.
 */
class Discovery {
  /** [class][sort length], sparse */
  readonly found: Candidate[][][] = [[], [], []];
  // Per depth, the plan of the last object shape seen: the items of a listing share one.
  private readonly plans: (KeyPlan | undefined)[] = [];

  constructor(private readonly maxBytes: number) {}

  /** Visits the members of `value` at `depth`; `prefix` is the length of the path to them, dot included. */
  visit(value: object, depth: number, outer: Segment | undefined, inner: Segment | undefined, prefix: number): void {
    const descend = depth < PRESERVED_MAX_DEPTH;
    if (Array.isArray(value)) {
      for (let i = 0; descend && i < value.length; i++) {
        const child: unknown = value[i];
        if (typeof child === "object" && child !== null) this.into(child, i, decimalDigits(i), depth, outer, inner, prefix);
      }
      return;
    }
    const keys = Object.keys(value);
    let plan = this.plans[depth];
    if (plan === undefined || !sameKeys(plan.keys, keys)) this.plans[depth] = plan = keyPlan(keys);
    const members = value as Record<string, unknown>;
    for (const { key, rank } of plan.status) {
      const child = members[key];
      const pathLength = prefix + key.length;
      if (!isPreservable(child) || leastEntryBytes(pathLength, child) >= this.maxBytes) continue;
      const sortLength = pathLength + (typeof child === "string" ? child.length : 5);
      ((this.found[rank] as Candidate[][])[sortLength] ??= []).push({ outer, inner, key, value: child, pathLength, depth });
    }
    if (!descend) return;
    for (const key of plan.descend) {
      const child = members[key];
      if (typeof child === "object" && child !== null) this.into(child, key, key.length, depth, outer, inner, prefix);
    }
  }

  /** Visits a child container: its segment becomes the outer one at depth 1, the inner one at depth 2. */
  private into(child: object, segment: Segment, length: number, depth: number, outer: Segment | undefined, inner: Segment | undefined, prefix: number): void {
    this.visit(child, depth + 1, depth === 1 ? segment : outer, depth === 2 ? segment : inner, prefix + length + 1);
  }
}

function foundCandidates(result: unknown, maxBytes: number): Candidate[][][] {
  const discovery = new Discovery(maxBytes);
  if (typeof result === "object" && result !== null) discovery.visit(result, 1, undefined, undefined, 0);
  return discovery.found;
}

export interface PreservedSelection {
  readonly fields: Record<string, PreservedValue>;
  /** The size of the compact JSON of `fields`, as measured while choosing them. */
  readonly bytes: number;
  /** The requested paths that are not in `fields`, and why. */
  readonly unpreserved: UnpreservedPath[];
}

/** The preserved fields of a (canonically valid) result, their compact JSON at most `maxBytes` long. */
export function preservedFields(result: unknown, maxBytes: number, requested: readonly string[] = []): PreservedSelection {
  const paths: string[] = [];
  const values = new Map<string, unknown>();
  const unpreserved: UnpreservedPath[] = [];
  let size = 1; // "{" + entries each with its comma or the closing "}"
  const take = (path: string, value: unknown, bytes: number): boolean => {
    if (size + bytes > maxBytes) return false;
    paths.push(path);
    values.set(path, value);
    size += bytes;
    return true;
  };
  for (const path of requested) {
    const value = valueAt(result, path);
    const reason = value === undefined ? "absent" : scalarReason(value);
    if (reason !== undefined) unpreserved.push({ path, reason });
    else if (!take(path, value, entryBytes(path, value))) unpreserved.push({ path, reason: "no_room" });
  }
  const requestedTaken = paths.length;
  for (const buckets of foundCandidates(result, maxBytes)) {
    for (let length = 0; length < buckets.length; length++) {
      // An entry takes at least its sort length (leastEntryBytes): from here on none of this class fits.
      if (size + length > maxBytes) break;
      for (const c of inWalkOrder(buckets[length])) {
        if (size + leastEntryBytes(c.pathLength, c.value) > maxBytes) continue; // cannot fit: not worth measuring
        const path = pathOf(c);
        if (requestedTaken === 0 || !values.has(path)) take(path, c.value, entryBytes(path, c.value));
      }
    }
  }
  const fields: Record<string, PreservedValue> = {};
  for (const path of sortKeys(paths)) fields[path] = values.get(path) as PreservedValue;
  return { fields, bytes: paths.length === 0 ? 2 : size, unpreserved };
}

/** The candidates of one bucket, shallower first, each depth in walk order: the walk was depth first. */
function inWalkOrder(candidates: Candidate[] | undefined): readonly Candidate[] {
  if (candidates === undefined) return [];
  for (let i = 1; i < candidates.length; i++) {
    if ((candidates[i] as Candidate).depth < (candidates[i - 1] as Candidate).depth) return candidates.sort((a, b) => a.depth - b.depth); // stable
  }
  return candidates;
}
