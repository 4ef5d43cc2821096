/**
 * The projection of a result as it first enters execution history (docs/protocol.md section 5): unchanged when
 * within budget, otherwise a head/tail preview of its canonical JSON that fits the budget.
 */
import { z } from "zod";
import { compactByteLength, decodeUtf8, withCanonicalResult } from "./canonical-json.js";
import { canonicalCost, takeHeadOfCanonical, takeTailOfCanonical } from "./head-tail.js";
import { isMultimodal, projectMultimodal } from "./multimodal.js";
import { preservedFields, type PreservedValue, type UnpreservedPath } from "./preserved-fields.js";

/**
 * Bumped whenever the projection of some input would change, so stored projections stay tellable apart.
 * 2: exact numbers, whole escapes at the cuts, every non-binary multimodal block counted, preserved
 * fields chosen by value and requested by the tool.
 */
export const PROJECTION_VERSION = 2;

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
  /** The tool's requested `preserve_fields` paths the model cannot see in `result`, and why. */
  readonly unpreserved: readonly UnpreservedPath[];
}

/** The over-budget form of a whole result. */
export interface PreviewResult {
  notice: string;
  preserved_fields: Record<string, PreservedValue>;
  preview: { head: string; omitted_bytes: number; tail: string };
}

/** Projects `result` for a budget already validated; throws CanonicalJsonError when it is no JSON value. */
export function projectResult(result: unknown, budget: number, kind: ResultKind, requested: readonly string[] = []): Projection {
  // Measuring also validates: exempt kinds must be JSON too.
  return withCanonicalResult(result, (canonical) => project(result, canonical, budget, kind, requested));
}

function project(result: unknown, canonical: Uint8Array, budget: number, kind: ResultKind, requested: readonly string[]): Projection {
  const originalBytes = canonical.length;
  const unchanged: Projection = { result, truncated: false, originalBytes, retainedBytes: originalBytes, unpreserved: [] };
  if (kind !== "completed") return unchanged;
  if (isMultimodal(result)) {
    const projected = projectMultimodal(result, originalBytes, budget);
    if (projected !== undefined) return { ...projected, unpreserved: [] };
  } else if (originalBytes <= budget) {
    return unchanged;
  }
  const { preview, retainedBytes, unpreserved } = previewOf(result, canonical, budget, requested);
  return { result: preview, truncated: true, originalBytes, retainedBytes, unpreserved };
}

const digits = (n: number): number => String(n).length;

const BACKSLASH = 0x5c;

/**
 * The escape sequence of canonical JSON that byte `at` falls strictly inside, as [start, end), or
 * undefined. A backslash starts an escape when an even number of backslashes precede it (`\\` is one
 * escaped backslash); `\u` escapes are 6 bytes long, all others 2.
 */
function escapeAround(bytes: Uint8Array, at: number): [number, number] | undefined {
  for (let k = at - 1; k >= 0 && k >= at - 5; k--) {
    if (bytes[k] !== BACKSLASH) continue;
    let before = 0;
    while (k - before - 1 >= 0 && bytes[k - before - 1] === BACKSLASH) before++;
    if (before % 2 === 1) continue; // the second half of an escaped backslash
    const end = k + (bytes[k + 1] === 0x75 ? 6 : 2);
    return end > at ? [k, end] : undefined;
  }
  return undefined;
}

interface Preview {
  preview: PreviewResult;
  retainedBytes: number;
  unpreserved: UnpreservedPath[];
}

function previewOf(result: unknown, canonical: Uint8Array, budget: number, requested: readonly string[]): Preview {
  const total = canonical.length;
  const notice =
    `Result truncated: ${total} bytes exceed max_result_context_bytes=${budget}. preview.head and preview.tail ` +
    `are the start and end of its canonical JSON; omitted_bytes were cut between them. Paginate or filter to see the rest.`;
  const preserved = preservedFields(result, Math.floor(budget * PRESERVED_FIELDS_SHARE), requested);
  const skeleton: PreviewResult = { notice, preserved_fields: {}, preview: { head: "", omitted_bytes: 0, tail: "" } };
  // The preserved fields were measured as they were chosen: `{}` is in the skeleton, the rest is added.
  const skeletonBytes = compactByteLength(skeleton) - 2 + preserved.bytes;
  skeleton.preserved_fields = preserved.fields;
  // omitted_bytes has at most as many digits as the total.
  const room = budget - skeletonBytes - (digits(total) - 1);

  // A character costs at least one byte escaped, so the cuts read at most `room` bytes of each end,
  // whatever the size of the result.
  const headRoom = Math.floor(room / 2);
  const head = takeHeadOfCanonical(canonical, headRoom);
  // A cut inside an escape of the canonical text (`\u00`) would show the model half an escape: cut before it.
  const headEnd = escapeAround(canonical, head.index)?.[0] ?? head.index;
  const tailRoom = room - head.cost;
  const tail = takeTailOfCanonical(canonical, tailRoom, headEnd);
  const tailBegin = escapeAround(canonical, tail.index)?.[1] ?? tail.index; // ...and after it

  const omitted = tailBegin - headEnd;
  skeleton.preview = { head: decodeUtf8(canonical.subarray(0, headEnd)), omitted_bytes: omitted, tail: decodeUtf8(canonical.subarray(tailBegin)) };
  // The preview's size without writing it again: the skeleton's, plus what the cuts cost escaped.
  const headCost = head.cost - canonicalCost(canonical, headEnd, head.index);
  const tailCost = tail.cost - canonicalCost(canonical, tail.index, tailBegin);
  return { preview: skeleton, retainedBytes: skeletonBytes + digits(omitted) - 1 + headCost + tailCost, unpreserved: preserved.unpreserved };
}
