/** The `context_preview` of a receipt: the budgeted form of its result that enters execution history. */
import { z } from "zod";
import { maxResultContextBytesSchema } from "./budget.js";
import { jsonValueSchema } from "./json-text.js";
import type { UnpreservedPath } from "./preserved-fields.js";
import { PROJECTION_VERSION, projectResult, resultKindSchema, type ResultKind } from "./projection.js";

export const contextPreviewSchema = z.object({
  max_result_context_bytes: maxResultContextBytesSchema,
  /** Compact canonical JSON bytes of the full result. */
  original_bytes: z.int().nonnegative(),
  /** Compact canonical JSON bytes of `result` below; above the budget only by non-text multimodal blocks. */
  retained_bytes: z.int().nonnegative(),
  truncated: z.boolean(),
  result: jsonValueSchema,
  /** The projection algorithm that produced `result`; a stored preview is never regenerated. */
  projection_version: z.int().positive(),
});
export type ContextPreview = z.infer<typeof contextPreviewSchema>;

export interface ContextPreviewOptions {
  maxResultContextBytes: number;
  kind?: ResultKind;
  /** The tool's `preserve_fields`: paths kept in `preserved_fields` first when the result is cut. */
  preserveFields?: readonly string[];
}

/**
 * Measures a result and forms its projection. Throws a ZodError for a budget outside 1024..32768 or an
 * unknown kind, and a CanonicalJsonError when the result is no JSON value (NaN, undefined, a cycle, ...).
 */
export function buildContextPreview(result: unknown, options: ContextPreviewOptions): ContextPreview {
  return previewWithReport(result, options).preview;
}

/** buildContextPreview, and which of the requested `preserveFields` the model cannot see, and why. */
export function previewWithReport(result: unknown, options: ContextPreviewOptions): { preview: ContextPreview; unpreserved: readonly UnpreservedPath[] } {
  const budget = maxResultContextBytesSchema.parse(options.maxResultContextBytes);
  const kind = resultKindSchema.parse(options.kind ?? "completed");
  const projection = projectResult(result, budget, kind, options.preserveFields);
  const preview = {
    max_result_context_bytes: budget,
    original_bytes: projection.originalBytes,
    retained_bytes: projection.retainedBytes,
    truncated: projection.truncated,
    result: projection.result, // the canonical writer has checked it is JSON
    projection_version: PROJECTION_VERSION,
  };
  return { preview, unpreserved: projection.unpreserved };
}
