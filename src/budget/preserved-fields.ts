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
import { compactByteLength, sortKeys } from "./canonical-json.js";
import { JsonFloat } from "./json-numbers.js";

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

interface Candidate {
  readonly path: string;
  readonly value: unknown;
  /** About the size of the entry (UTF-16 units), for ordering; its exact bytes are measured only when taken. */
  readonly length: number;
  readonly rank: number;
  readonly depth: number;
  readonly order: number;
}

/** `"a":1,` */
const SMALLEST_ENTRY = 6;

const entryBytes = (path: string, value: unknown): number => compactByteLength(path) + 1 + compactByteLength(value) + 1;

/** A lower bound of entryBytes without writing anything: a UTF-16 unit takes at least one byte, a value at least one. */
const leastEntryBytes = (path: string, value: unknown): number => path.length + 3 + (typeof value === "string" ? value.length + 2 : 1) + 1;

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

/** Candidates by key at depth ≤ 3, in walk order (depth, then canonical order). */
function foundCandidates(result: unknown): Candidate[] {
  const found: Candidate[] = [];
  let frontier: { value: object; path: string }[] = typeof result === "object" && result !== null ? [{ value: result, path: "" }] : [];
  for (let depth = 1; depth <= PRESERVED_MAX_DEPTH && frontier.length > 0; depth++) {
    const next: typeof frontier = [];
    for (const { value, path } of frontier) {
      const isArray = Array.isArray(value);
      for (const segment of interestingSegments(value, isArray, depth < PRESERVED_MAX_DEPTH)) {
        const child: unknown = (value as Record<string, unknown>)[segment];
        const childPath = depth === 1 ? segment : `${path}.${segment}`;
        if (!isArray && isStatusKey(segment) && scalarReason(child) === undefined)
          found.push({ path: childPath, value: child, length: childPath.length + (typeof child === "string" ? child.length : 5), rank: classOf(segment), depth, order: found.length });
        if (depth < PRESERVED_MAX_DEPTH && typeof child === "object" && child !== null) next.push({ value: child, path: childPath });
      }
    }
    frontier = next;
  }
  return found;
}

/** The keys (or indices) of a container worth visiting, in canonical order; the rest is never sorted. */
function interestingSegments(value: object, isArray: boolean, descend: boolean): string[] {
  if (isArray) {
    const items = value as unknown[];
    const indices: string[] = [];
    for (let i = 0; descend && i < items.length; i++) {
      if (typeof items[i] === "object" && items[i] !== null) indices.push(String(i));
    }
    return indices;
  }
  const keys = Object.keys(value).filter((key) => {
    if (key.includes(".")) return false;
    const child: unknown = (value as Record<string, unknown>)[key];
    return isStatusKey(key) || (descend && typeof child === "object" && child !== null);
  });
  return sortKeys(keys);
}

export interface PreservedSelection {
  readonly fields: Record<string, PreservedValue>;
  /** The requested paths that are not in `fields`, and why. */
  readonly unpreserved: UnpreservedPath[];
}

/** The preserved fields of a (canonically valid) result, their compact JSON at most `maxBytes` long. */
export function preservedFields(result: unknown, maxBytes: number, requested: readonly string[] = []): PreservedSelection {
  const chosen = new Map<string, unknown>();
  const unpreserved: UnpreservedPath[] = [];
  let size = 1; // "{" + entries each with its comma or the closing "}"
  const take = (path: string, value: unknown, bytes: number): boolean => {
    if (chosen.has(path)) return true;
    if (size + bytes > maxBytes) return false;
    chosen.set(path, value);
    size += bytes;
    return true;
  };
  for (const path of requested) {
    const value = valueAt(result, path);
    const reason = value === undefined ? "absent" : scalarReason(value);
    if (reason !== undefined) unpreserved.push({ path, reason });
    else if (!take(path, value, entryBytes(path, value))) unpreserved.push({ path, reason: "no_room" });
  }
  const candidates = foundCandidates(result).sort((a, b) => a.rank - b.rank || a.length - b.length || a.depth - b.depth || a.order - b.order);
  for (const c of candidates) {
    if (size + SMALLEST_ENTRY > maxBytes) break; // full: measuring the rest would change nothing
    if (size + leastEntryBytes(c.path, c.value) > maxBytes) continue; // cannot fit: not worth measuring
    take(c.path, c.value, entryBytes(c.path, c.value));
  }
  const fields: Record<string, PreservedValue> = {};
  for (const path of sortKeys([...chosen.keys()])) fields[path] = chosen.get(path) as PreservedValue;
  return { fields, unpreserved };
}
