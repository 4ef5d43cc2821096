import { DEFAULT_RESULT_CONTEXT_BYTES } from "../budget/budget.js";
import type { BindingInput, PublishToolsetVersion } from "../config/schemas.js";
import { PublishToolsetVersionSchema } from "../config/schemas.js";
import type { MappedTool } from "./tool-mapping.js";

/** What `toolgate mcp import` prints: the bindings the tools need, and the toolset version to publish. */
export interface ImportedToolset {
  toolset: string;
  /** One per kind the server's tools have (a binding has a single kind). */
  bindings: BindingInput[];
  version: PublishToolsetVersion;
}

/**
 * The toolset version of an MCP server's tools: the MCP name (with the prefix), description and
 * input schema; the kind through the tool's binding; `max_result_context_bytes` defaulted to 16 KiB.
 * The output schema describes what the executor reports as `completed`: the MCP tool result itself
 * (content blocks, and `structuredContent` as the tool's own output schema says when it has one).
 */
export function importedToolset(
  tools: readonly MappedTool[],
  options: { toolset: string; version: string; scope: string; maxResultContextBytes?: number },
): ImportedToolset {
  const bindings = new Map<string, BindingInput>();
  for (const t of tools)
    bindings.set(t.bindingId, { binding_id: t.bindingId, executor_scope: options.scope, tool_kind: t.kind, description: `tools of an MCP server (${t.kind})` });
  const version = PublishToolsetVersionSchema.parse({
    version: options.version,
    tools: tools.map((t) => ({
      name: t.name,
      description: t.tool.description || t.tool.title || t.tool.annotations?.title || `MCP tool ${t.mcpName}`,
      binding_id: t.bindingId,
      input_schema: withoutDialect(t.tool.inputSchema),
      output_schema: resultSchema(t.tool.outputSchema),
      max_result_context_bytes: options.maxResultContextBytes ?? DEFAULT_RESULT_CONTEXT_BYTES,
    })),
  });
  return { toolset: options.toolset, bindings: [...bindings.values()], version };
}

/**
 * Toolgate's schemas are JSON Schema 2020-12; MCP SDKs often stamp draft-07 on theirs. For the
 * object schemas tools use the two read the same, so the stamp is dropped rather than refused.
 */
function withoutDialect(schema: Record<string, unknown>): Record<string, unknown> {
  const { $schema: _dialect, ...rest } = schema;
  return rest;
}

function resultSchema(structured: Record<string, unknown> | undefined): Record<string, unknown> {
  return {
    type: "object",
    description: "The MCP tool result: content blocks (text, image, audio, resource...) and, when the tool has an output schema, structuredContent",
    properties: {
      content: { type: "array", items: { type: "object", properties: { type: { type: "string" } }, required: ["type"] } },
      ...(structured ? { structuredContent: withoutDialect(structured) } : {}),
    },
    required: ["content"],
  };
}
