import { DEFAULT_RESULT_CONTEXT_BYTES } from "../budget/index.js";
import { REMOVED_TOOL_FIELDS } from "../config/removed-fields.js";
import { configKeys } from "../config/keys.js";
import { AgentVersionSchema, BindingSchema, SessionSchema, ToolsetVersionSchema } from "../config/schemas.js";
import type { z } from "zod";

/** The kinds of configuration object a legacy deployment holds, in dependency order. */
export const LEGACY_KINDS = {
  bindings: { schema: BindingSchema, key: (v: z.infer<typeof BindingSchema>) => configKeys.binding(v.binding_id) },
  toolsets: { schema: ToolsetVersionSchema, key: (v: z.infer<typeof ToolsetVersionSchema>) => configKeys.toolsetVersion(v.toolset, v.version) },
  agents: { schema: AgentVersionSchema, key: (v: z.infer<typeof AgentVersionSchema>) => configKeys.agentVersion(v.agent_version) },
  sessions: { schema: SessionSchema, key: (v: z.infer<typeof SessionSchema>) => configKeys.session(v.session_id) },
} as const;
export type LegacyKind = keyof typeof LEGACY_KINDS;

/**
 * Rewrites a legacy toolset version's tools to the byte-budget protocol: `max_result_tokens` and
 * `max_result_bytes` are dropped and, where no byte budget was set, the 16 KiB default takes their
 * place (docs/protocol.md section 5: token settings are replaced once by the default, not converted).
 * Returns the new object and one line per change; the input is not modified.
 */
export function convertLegacyToolset(raw: unknown): { value: unknown; changes: string[] } {
  if (typeof raw !== "object" || raw === null || !Array.isArray((raw as { tools?: unknown }).tools)) return { value: raw, changes: [] };
  const changes: string[] = [];
  const tools = (raw as { tools: unknown[] }).tools.map((tool, i) => {
    if (typeof tool !== "object" || tool === null) return tool;
    const next: Record<string, unknown> = { ...(tool as Record<string, unknown>) };
    const label = `tools[${i}] ${String(next.name)}`;
    const removed = Object.keys(REMOVED_TOOL_FIELDS).filter((f) => f in next);
    for (const field of removed) {
      changes.push(`${label}: removed ${field}=${JSON.stringify(next[field])}`);
      delete next[field];
    }
    if (removed.length > 0 && next.max_result_context_bytes === undefined) {
      next.max_result_context_bytes = DEFAULT_RESULT_CONTEXT_BYTES;
      changes.push(`${label}: set max_result_context_bytes=${DEFAULT_RESULT_CONTEXT_BYTES} (default)`);
    }
    return next;
  });
  return { value: { ...(raw as object), tools }, changes };
}
