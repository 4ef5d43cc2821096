import { z } from "zod";
import { contextPreviewSchema } from "../budget/index.js";
import { requestGateway, type GatewayTarget } from "./gateway-request.js";

/** A result sample to preview: what a handler of this tool really returns. */
export interface DryRunSample {
  receipt_id?: string;
  kind?: "completed" | "failed" | "cancelled" | "reconciliation_required" | "progress" | "submission";
  result?: unknown;
  /** For a submission: what `ctx.submit` would send. */
  task_ref?: string;
  status?: string;
}

export interface DryRunRequest {
  /** A published agent version (fixed id). */
  agent_version: string;
  tool_name: string;
  arguments: unknown;
  mock_receipts: DryRunSample[];
}

const DryRunResponse = z.looseObject({
  /** What the model would see of the first `completed` sample; null without one. */
  context_preview: contextPreviewSchema.nullable(),
  /** Each sample in order and what the model sees of it (a submission, then its completed as a task result). */
  steps: z.array(z.looseObject({ receipt_id: z.string(), kind: z.string(), history_entry: z.enum(["tool_result", "task_result", "none"]), context_preview: contextPreviewSchema.nullable() })),
  /** Always false: a dry-run executes no business. */
  execution_verified: z.literal(false),
});
export type DryRunResponse = z.infer<typeof DryRunResponse>;

/**
 * Asks the gateway's `POST /v1/tools/dry-run` what the model would see of a result, for a product's
 * own tests: feed it real result samples and check that cursors, ids and statuses stay visible.
 * It creates no run and executes nothing. `apiKey` needs the agent's scope and one of
 * `runtime:read`, `configuration:read` or `tools:execute`. A refusal throws `GatewayError` (status, code).
 */
export async function dryRun(target: GatewayTarget, request: DryRunRequest): Promise<DryRunResponse> {
  const samples = request.mock_receipts.map((s, i) => ({ ...s, receipt_id: s.receipt_id ?? `dry-run-${i + 1}`, kind: s.kind ?? "completed" }));
  const body = await requestGateway(target, "POST", "/v1/tools/dry-run", { ...request, mock_receipts: samples });
  return DryRunResponse.parse(body);
}
