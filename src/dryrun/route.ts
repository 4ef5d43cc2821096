import { z } from "zod";
import { contextPreviewSchema, jsonValueSchema, previewWithReport } from "../budget/index.js";
import type { ConfigStore } from "../config/config-store.js";
import { AgentVersionIdSchema, agentOfVersion, ToolNameSchema } from "../config/ids.js";
import { ToolgateError } from "../errors/toolgate-error.js";
import { defineRoute, type RouteDef } from "../http/route.js";
import { compileJsonSchema, schemaDetails } from "../validation/json-schema.js";

const MockReceiptSchema = z
  .strictObject({
    receipt_id: z.string().min(1).max(256),
    kind: z.enum(["progress", "completed", "failed", "cancelled", "reconciliation_required", "submission"]),
    result: jsonValueSchema.optional().describe("The business result, as the executor would send it"),
  })
  .meta({ title: "MockReceipt" });

export const DryRunRequestSchema = z
  .strictObject({
    agent_version: AgentVersionIdSchema,
    tool_name: ToolNameSchema,
    arguments: z.record(z.string(), jsonValueSchema).default({}),
    mock_receipts: z.array(MockReceiptSchema).max(100).default([]),
  })
  .meta({ title: "DryRunRequest" });

export const DryRunResponseSchema = z
  .strictObject({
    agent_version: AgentVersionIdSchema,
    tool_name: ToolNameSchema,
    toolset: z.string(),
    toolset_version: z.string(),
    context_preview: contextPreviewSchema.nullable().describe("What the first completed mock receipt's result looks like in execution history; null without one"),
    preserve_fields: z.array(z.string()).describe("The tool's preserve_fields: paths kept first in preserved_fields when the result is cut"),
    unpreserved_fields: z
      .array(z.strictObject({ path: z.string(), reason: z.enum(["absent", "not_a_scalar", "too_long", "no_room"]) }))
      .describe("The requested paths the model would not see in preserved_fields of the cut result: absent, not_a_scalar, too_long (a string over 128 bytes) or no_room (past a quarter of the budget)"),
    execution_verified: z.literal(false).describe("Always false: a valid schema proves nothing about the real business"),
  })
  .meta({ title: "DryRunResponse" });

/**
 * `POST /v1/tools/dry-run` (docs/protocol.md section 6): what the model would see of a tool's result.
 * Reads configuration only; creates no run, calls no model or executor, writes nothing.
 */
export function dryRunRoutes(store: ConfigStore): RouteDef[] {
  return [
    defineRoute({
      id: "dryRunTool",
      method: "POST",
      path: "/v1/tools/dry-run",
      summary: "Preview the context a tool result takes (validates arguments, projects the first completed mock receipt)",
      tags: ["tools"],
      permissions: ["runtime:read", "configuration:read", "tools:execute"],
      errors: ["agent_version_not_found", "tool_not_found", "toolset_version_missing", "invalid_stored_schema"],
      body: DryRunRequestSchema,
      exactNumbers: true,
      agentScope: ({ body }) => agentOfVersion(body.agent_version),
      response: DryRunResponseSchema,
      handler: async ({ body }) => {
        const { toolsetVersion, tool } = await store.resolveAgentTool(body.agent_version, body.tool_name);
        const { validate, details } = compileJsonSchema(tool.input_schema, ["tool", "input_schema"]);
        if (!validate) throw new ToolgateError("invalid_stored_schema", `stored input_schema of '${tool.name}' does not compile: ${details[0]?.message ?? ""}`);
        const argumentErrors = schemaDetails(validate, body.arguments, ["arguments"]);
        if (argumentErrors.length > 0) throw ToolgateError.validation(argumentErrors, `arguments do not match the input_schema of '${tool.name}'`);
        const completed = body.mock_receipts.find((r) => r.kind === "completed");
        if (completed && completed.result === undefined)
          throw ToolgateError.validation([{ path: `mock_receipts[${body.mock_receipts.indexOf(completed)}].result`, code: "required", message: "a completed receipt carries a result" }]);
        const preserveFields = tool.preserve_fields ?? [];
        const projected = completed ? previewWithReport(completed.result, { maxResultContextBytes: tool.max_result_context_bytes, kind: "completed", preserveFields }) : undefined;
        return {
          agent_version: body.agent_version,
          tool_name: tool.name,
          toolset: toolsetVersion.toolset,
          toolset_version: toolsetVersion.version,
          context_preview: projected?.preview ?? null,
          preserve_fields: preserveFields,
          unpreserved_fields: [...(projected?.unpreserved ?? [])],
          execution_verified: false as const,
        };
      },
    }),
  ];
}
