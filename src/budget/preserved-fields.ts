/**
 * `preserved_fields` of a projection: short status fields of the original, so that a cursor, a status or
 * the key ids stay visible when the structure around them is cut.
 *
 * Rules:
 * - a field qualifies when its object key is `id`, ends in `_id`, or is one of STATUS_KEYS, its path has
 *   at most 3 segments, and its value is null, a boolean, a number or a string of at most 128 UTF-8 bytes;
 * - a path joins its segments with `.`; an array index is a segment in decimal (`items.0.id`, depth 3);
 *   a key containing `.` would make paths ambiguous, so it and everything below it are skipped;
 * - candidates are ordered by depth, then in canonical order (keys by code point, indices ascending);
 * - the longest prefix of that order whose compact JSON fits `maxBytes` is kept: selection stops at the
 *   first field that does not fit, which also bounds the walk over a large result.
 */
import { compactByteLength, sortKeys } from "./canonical-json.js";

export const PRESERVED_MAX_DEPTH = 3;
const PRESERVED_MAX_STRING_BYTES = 128;
export const STATUS_KEYS: ReadonlySet<string> = new Set([
  "id",
  "status",
  "state",
  "next_cursor",
  "cursor",
  "next_page_token",
  "page_token",
  "has_more",
  "total",
  "count",
  "error",
  "code",
]);

/** Any key ending in this names an id worth preserving (`task_id`, `order_id`). */
export const STATUS_KEY_SUFFIX = "_id";

export type PreservedValue = string | number | boolean | null;

export const isStatusKey = (key: string): boolean => STATUS_KEYS.has(key) || key.endsWith(STATUS_KEY_SUFFIX);

function isPreservable(v: unknown): v is PreservedValue {
  if (typeof v === "string") return Buffer.byteLength(v, "utf8") <= PRESERVED_MAX_STRING_BYTES;
  return v === null || typeof v === "number" || typeof v === "boolean";
}

interface Node {
  readonly value: object;
  readonly path: string;
}

/** The preserved fields of a (canonically valid) result, their compact JSON at most `maxBytes` long. */
export function preservedFields(result: unknown, maxBytes: number): Record<string, PreservedValue> {
  const fields: Record<string, PreservedValue> = {};
  let size = 2; // "{}"
  let frontier: Node[] = typeof result === "object" && result !== null ? [{ value: result, path: "" }] : [];
  for (let depth = 1; depth <= PRESERVED_MAX_DEPTH && frontier.length > 0; depth++) {
    const next: Node[] = [];
    for (const { value, path } of frontier) {
      const isArray = Array.isArray(value);
      for (const segment of interestingSegments(value, isArray, depth < PRESERVED_MAX_DEPTH)) {
        const child: unknown = (value as Record<string, unknown>)[segment];
        const childPath = depth === 1 ? segment : `${path}.${segment}`;
        if (!isArray && isStatusKey(segment) && isPreservable(child)) {
          const entry = compactByteLength(childPath) + 1 + compactByteLength(child) + (size > 2 ? 1 : 0);
          if (size + entry > maxBytes) return fields;
          fields[childPath] = child;
          size += entry;
        }
        if (depth < PRESERVED_MAX_DEPTH && typeof child === "object" && child !== null) next.push({ value: child, path: childPath });
      }
    }
    frontier = next;
  }
  return fields;
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
