import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import type { Binding, ToolDefinition } from "../config/schemas.js";

/** The shape of a result cut to its byte budget (see `budget/projection.ts`). */
const CUT_RESULT_SCHEMA = {
  type: "object",
  required: ["notice", "preserved_fields", "preview"],
  properties: {
    notice: { type: "string" },
    preserved_fields: { type: "object" },
    preview: {
      type: "object",
      required: ["head", "omitted_bytes", "tail"],
      properties: { head: { type: "string" }, omitted_bytes: { type: "integer" }, tail: { type: "string" } },
    },
  },
};

/**
 * A tool of the pinned toolset version as MCP lists it. Its `outputSchema` is the tool's own or the
 * cut preview (MCP structured content is an object: a tool whose results are not objects lists none).
 * The annotations come from the binding: a read has no side effects; a write may change the product
 * and repeating it is not assumed safe (toolgate makes one tool call execute once, not two calls).
 */
export function mcpTool(tool: ToolDefinition, binding: Binding): Tool {
  const read = binding.tool_kind === "read";
  const objects = (tool.output_schema as { type?: unknown }).type === "object";
  return {
    name: tool.name,
    description: tool.description,
    inputSchema: tool.input_schema as Tool["inputSchema"],
    ...(objects ? { outputSchema: { type: "object", anyOf: [tool.output_schema, CUT_RESULT_SCHEMA] } as Tool["outputSchema"] } : {}),
    execution: { taskSupport: "optional" },
    annotations: read
      ? { readOnlyHint: true, destructiveHint: false, idempotentHint: true }
      : { readOnlyHint: false, destructiveHint: true, idempotentHint: false },
  };
}
