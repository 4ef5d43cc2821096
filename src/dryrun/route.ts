import { z } from "zod";
import { buildContextPreview, previewWithReport, type ContextPreview } from "../budget/index.js";
import type { ConfigStore } from "../config/config-store.js";
import { agentOfVersion } from "../config/ids.js";
import { ToolgateError } from "../errors/toolgate-error.js";
import { defineRoute, type RouteDef } from "../http/route.js";
import { compileJsonSchema, schemaDetails } from "../validation/json-schema.js";
import { DryRunRequestSchema, DryRunResponseSchema, MockReceiptSchema } from "./schemas.js";
import { TASK_REF_MAX_BYTES, TASK_STATUS_MAX_BYTES } from "../wire/messages.js";

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
      errors: ["agent_version_not_found", "tool_not_found", "toolset_version_missing", "invalid_stored_schema", "submission_too_large"],
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
          throw ToolgateError.validation([
            { path: `mock_receipts[${body.mock_receipts.indexOf(completed)}].result`, code: "required", message: "a completed receipt carries a result" },
          ]);
        const preserveFields = tool.preserve_fields ?? [];
        const projected = completed
          ? previewWithReport(completed.result, { maxResultContextBytes: tool.max_result_context_bytes, kind: "completed", preserveFields })
          : undefined;
        const steps = previewSteps(body.mock_receipts, tool.max_result_context_bytes, projected?.preview);
        return {
          agent_version: body.agent_version,
          tool_name: tool.name,
          toolset: toolsetVersion.toolset,
          toolset_version: toolsetVersion.version,
          context_preview: projected?.preview ?? null,
          preserve_fields: preserveFields,
          unpreserved_fields: [...(projected?.unpreserved ?? [])],
          steps,
          execution_verified: false as const,
        };
      },
    }),
  ];
}

type MockReceipt = z.infer<typeof MockReceiptSchema>;
type Step = z.infer<typeof DryRunResponseSchema>["steps"][number];
const SETTLING = new Set<MockReceipt["kind"]>(["completed", "failed", "cancelled", "reconciliation_required"]);
const utf8Bytes = (s: string): number => Buffer.byteLength(s, "utf8");

/**
 * What the model sees at each mock receipt, as the gateway would store it: a submission answers the
 * tool call whole (never cut); the `completed` after it is a task result entry of its own, projected
 * with the tool's budget (`completed`, the first one's projection); progress is never in history,
 * nor is anything after the call settled. A submission's size is bounded as on the wire: refused
 * with `submission_too_large`.
 */
function previewSteps(receipts: readonly MockReceipt[], budget: number, completed: ContextPreview | undefined): Step[] {
  let submitted = false;
  let settled = false;
  return receipts.map((r, i) => {
    const step = (history_entry: Step["history_entry"], context_preview: ContextPreview | null = null): Step => ({
      receipt_id: r.receipt_id,
      kind: r.kind,
      history_entry,
      context_preview,
    });
    if (r.kind === "progress" || settled) return step("none");
    if (r.kind === "submission") {
      if (submitted) return step("none");
      const task = { task_ref: r.task_ref, status: r.status };
      for (const [field, max] of [
        ["task_ref", TASK_REF_MAX_BYTES],
        ["status", TASK_STATUS_MAX_BYTES],
      ] as const) {
        const value = task[field];
        if (value === undefined || value === "")
          throw ToolgateError.validation([{ path: `mock_receipts[${i}].${field}`, code: "required", message: `a submission carries a non-empty ${field}` }]);
        if (utf8Bytes(value) > max)
          throw new ToolgateError(
            "submission_too_large",
            `mock_receipts[${i}].${field} is ${utf8Bytes(value)} bytes of UTF-8; at most ${max} are allowed: a submission enters history whole, so it is bounded instead of cut`,
            [{ path: `mock_receipts[${i}].${field}`, code: "too_big", message: `at most ${max} bytes of UTF-8` }],
          );
      }
      submitted = true;
      return step("tool_result", buildContextPreview(task, { maxResultContextBytes: budget, kind: "submission" }));
    }
    settled = SETTLING.has(r.kind);
    const entry = submitted ? "task_result" : "tool_result";
    // The first completed is the one projected (the same preview as `context_preview`).
    return step(entry, r.kind === "completed" ? (completed ?? null) : null);
  });
}
