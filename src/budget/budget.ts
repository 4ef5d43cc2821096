import { z } from "zod";
import { PRESERVED_PATH_MAX_SEGMENTS } from "./preserved-fields.js";

/** docs/protocol.md section 5: the configured byte budget of a tool result as it enters the model's context. */
export const MIN_RESULT_CONTEXT_BYTES = 1024;
export const MAX_RESULT_CONTEXT_BYTES = 32768;
export const DEFAULT_RESULT_CONTEXT_BYTES = 16384;

const RANGE_MESSAGE = `max_result_context_bytes must be an integer from ${MIN_RESULT_CONTEXT_BYTES} to ${MAX_RESULT_CONTEXT_BYTES} (bytes of compact JSON, not tokens)`;

/** `max_result_context_bytes` itself; every failure names the allowed range. */
export const maxResultContextBytesSchema = z
  .int({ error: RANGE_MESSAGE })
  .min(MIN_RESULT_CONTEXT_BYTES, { error: RANGE_MESSAGE })
  .max(MAX_RESULT_CONTEXT_BYTES, { error: RANGE_MESSAGE });

const removed = (name: string) =>
  z.never({ error: `${name} was removed; use max_result_context_bytes (${MIN_RESULT_CONTEXT_BYTES}..${MAX_RESULT_CONTEXT_BYTES} bytes)` }).optional();

/** The budget settings of a tool: the default applies when unset; the removed fields have no alias. */
export const resultContextBudgetSchema = z.object({
  max_result_context_bytes: maxResultContextBytesSchema.default(DEFAULT_RESULT_CONTEXT_BYTES),
  max_result_tokens: removed("max_result_tokens"),
  max_result_bytes: removed("max_result_bytes"),
});
export type ResultContextBudget = z.infer<typeof resultContextBudgetSchema>;

const PATH_MESSAGE = `a dotted path of 1 to ${PRESERVED_PATH_MAX_SEGMENTS} non-empty segments, an array index in decimal (data.next_cursor, items.0.id)`;

/** A tool's `preserve_fields`: result paths to keep in `preserved_fields` first when the result is cut. */
export const preserveFieldsSchema = z
  .array(
    z
      .string()
      .max(256)
      .regex(new RegExp(`^[^.]+(\\.[^.]+){0,${PRESERVED_PATH_MAX_SEGMENTS - 1}}$`), { error: PATH_MESSAGE }),
  )
  .max(32)
  .refine((paths) => new Set(paths).size === paths.length, { error: "each path at most once" })
  .describe(
    "Result paths the model must see even when the result is cut: kept first in preserved_fields (scalars, strings up to 128 bytes), inside the same quarter of the budget; the dry-run names those that did not fit",
  );
