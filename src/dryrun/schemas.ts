import { z } from "zod";
import { contextPreviewSchema, jsonValueSchema } from "../budget/index.js";
import { AgentVersionIdSchema, ToolNameSchema } from "../config/ids.js";
import { TASK_REF_MAX_BYTES, TASK_STATUS_MAX_BYTES } from "../wire/messages.js";

/**
 * The body and answer of `POST /v1/tools/dry-run`: one source for the route's validation, its
 * OpenAPI entry, and the types of the ToolRunner's `dryRun` helper and the client's operation.
 */

export const MockReceiptSchema = z
  .strictObject({
    receipt_id: z.string().min(1).max(256),
    kind: z.enum(["progress", "completed", "failed", "cancelled", "reconciliation_required", "submission"]),
    result: jsonValueSchema.optional().describe("The business result, as the executor would send it"),
    task_ref: z.string().optional().describe(`For a submission: the business task's reference (at most ${TASK_REF_MAX_BYTES} bytes of UTF-8)`),
    status: z.string().optional().describe(`For a submission: the short status the model reads (at most ${TASK_STATUS_MAX_BYTES} bytes of UTF-8)`),
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
    context_preview: contextPreviewSchema
      .nullable()
      .describe("What the first completed mock receipt's result looks like in execution history; null without one"),
    preserve_fields: z.array(z.string()).describe("The tool's preserve_fields: paths kept first in preserved_fields when the result is cut"),
    unpreserved_fields: z
      .array(z.strictObject({ path: z.string(), reason: z.enum(["absent", "not_a_scalar", "too_long", "no_room"]) }))
      .describe(
        "The requested paths the model would not see in preserved_fields of the cut result: absent, not_a_scalar, too_long (a string over 128 bytes) or no_room (past a quarter of the budget)",
      ),
    steps: z
      .array(
        z.strictObject({
          receipt_id: z.string(),
          kind: MockReceiptSchema.shape.kind,
          history_entry: z
            .enum(["tool_result", "task_result", "none"])
            .describe(
              "Where the model reads this receipt: as the tool call's answer, as a task result entry of its own (a completed after a submission), or not at all (progress, what follows a settlement)",
            ),
          context_preview: contextPreviewSchema
            .nullable()
            .describe("What the model reads: the submission whole, a completed result projected with the tool's budget; null for the others"),
        }),
      )
      .describe("Each mock receipt in order, and what the model sees of it (docs/async-tasks.md)"),
    execution_verified: z.literal(false).describe("Always false: a valid schema proves nothing about the real business"),
  })
  .meta({ title: "DryRunResponse" });
