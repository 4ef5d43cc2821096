/**
 * Tool configuration fields removed by the byte-budget protocol (docs/protocol.md section 5). Passing one
 * fails validation with this message; there is no alias. `toolgate migrate` rewrites stored ones.
 */
export const REMOVED_TOOL_FIELDS: Readonly<Record<string, string>> = {
  max_result_tokens:
    "max_result_tokens was removed: set max_result_context_bytes instead (bytes of the result's compact JSON, 1024..32768, default 16384; no token coefficient)",
  max_result_bytes:
    "max_result_bytes (receipt rejection) was removed: receipts are never rejected for size; set max_result_context_bytes (1024..32768, default 16384) to budget what the model sees",
};

export function isRemovedField(field: string): boolean {
  return Object.hasOwn(REMOVED_TOOL_FIELDS, field);
}
