/**
 * The projection of a result as it first enters execution history (docs/protocol.md section 5): unchanged when
 * within budget, otherwise a head/tail preview of its canonical JSON that fits the budget.
 */
import { z } from "zod";
import { compactByteLength, decodeUtf8, withCanonicalJson } from "./canonical-json.js";
import { takeHead, takeTail } from "./head-tail.js";
import { isMultimodal, projectMultimodal } from "./multimodal.js";
import { preservedFields, type PreservedValue } from "./preserved-fields.js";

/** Bumped whenever the projection of some input would change, so stored projections stay tellable apart. */
export const PROJECTION_VERSION = 1;

/** Share of the budget `preserved_fields` may take at most; the rest is left to head and tail. */
export const PRESERVED_FIELDS_SHARE = 1 / 4;

/** What a result is; all but `completed` are protocol-protected and never cut. */
export const resultKindSchema = z.enum(["completed", "submission", "reconciliation_required", "opaque_replay"]);
export type ResultKind = z.infer<typeof resultKindSchema>;

export interface Projection {
  readonly result: unknown;
  readonly truncated: boolean;
  readonly originalBytes: number;
  readonly retainedBytes: number;
}

/** The over-budget form of a whole result. */
export interface PreviewResult {
  notice: string;
  preserved_fields: Record<string, PreservedValue>;
  preview: { head: string; omitted_bytes: number; tail: string };
}

/** Projects `result` for a budget already validated; throws CanonicalJsonError when it is no JSON value. */
export function projectResult(result: unknown, budget: number, kind: ResultKind): Projection {
  // Measuring also validates: exempt kinds must be JSON too.
  return withCanonicalJson(result, (canonical) => project(result, canonical, budget, kind));
}

function project(result: unknown, canonical: Uint8Array, budget: number, kind: ResultKind): Projection {
  const originalBytes = canonical.length;
  const unchanged: Projection = { result, truncated: false, originalBytes, retainedBytes: originalBytes };
  if (kind !== "completed") return unchanged;
  if (isMultimodal(result)) {
    const projected = projectMultimodal(result, originalBytes, budget);
    if (projected !== undefined) return projected;
  } else if (originalBytes <= budget) {
    return unchanged;
  }
  const preview = previewOf(result, canonical, budget);
  return { result: preview, truncated: true, originalBytes, retainedBytes: compactByteLength(preview) };
}

const digits = (n: number): number => String(n).length;

/** Start of the UTF-8 character holding byte `i` (or `i` itself at the end). */
function charStart(bytes: Uint8Array, i: number): number {
  while (i > 0 && i < bytes.length && ((bytes[i] as number) & 0xc0) === 0x80) i--;
  return i;
}

/** First UTF-8 character start at or after byte `i`. */
function nextCharStart(bytes: Uint8Array, i: number): number {
  while (i < bytes.length && ((bytes[i] as number) & 0xc0) === 0x80) i++;
  return i;
}

function previewOf(result: unknown, canonical: Uint8Array, budget: number): PreviewResult {
  const total = canonical.length;
  const notice =
    `Result truncated: ${total} bytes exceed max_result_context_bytes=${budget}. preview.head and preview.tail ` +
    `are the start and end of its canonical JSON; omitted_bytes were cut between them. Paginate or filter to see the rest.`;
  const preserved = preservedFields(result, Math.floor(budget * PRESERVED_FIELDS_SHARE));
  const skeleton: PreviewResult = { notice, preserved_fields: preserved, preview: { head: "", omitted_bytes: 0, tail: "" } };
  // omitted_bytes has at most as many digits as the total.
  const room = budget - compactByteLength(skeleton) - (digits(total) - 1);

  // A character costs at least one byte escaped, so a cut of cost c lies within the first (last) c bytes:
  // only those are decoded, whatever the size of the result.
  const headRoom = Math.floor(room / 2);
  const headRegion = decodeUtf8(canonical.subarray(0, charStart(canonical, Math.min(headRoom, total))));
  const head = takeHead(headRegion, headRoom);
  const tailRoom = room - head.cost;
  const tailFrom = Math.max(head.utf8, total - tailRoom);
  const tailRegion = decodeUtf8(canonical.subarray(nextCharStart(canonical, tailFrom)));
  const tail = takeTail(tailRegion, tailRoom);

  skeleton.preview = {
    head: headRegion.slice(0, head.index),
    omitted_bytes: total - head.utf8 - tail.utf8,
    tail: tailRegion.slice(tail.index),
  };
  return skeleton;
}
