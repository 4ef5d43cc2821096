import type { z } from "zod";
import { DryRunResponseSchema, type DryRunRequestSchema, type MockReceiptSchema } from "../dryrun/schemas.js";
import { requestGateway, type GatewayTarget } from "./gateway-request.js";

type MockReceipt = z.input<typeof MockReceiptSchema>;

/**
 * A result sample to preview: what a handler of this tool really returns, as the gateway's mock
 * receipt, its id and kind optional here (`dry-run-<n>`, `completed`).
 */
export type DryRunSample = Omit<MockReceipt, "receipt_id" | "kind"> & Partial<Pick<MockReceipt, "receipt_id" | "kind">>;

/** The gateway's dry-run request, its samples as `DryRunSample`. */
export type DryRunRequest = Omit<z.input<typeof DryRunRequestSchema>, "mock_receipts"> & { mock_receipts: DryRunSample[] };

/** The gateway's dry-run answer, as its route declares it. */
export type DryRunResponse = z.output<typeof DryRunResponseSchema>;

/**
 * Asks the gateway's `POST /v1/tools/dry-run` what the model would see of a result, for a product's
 * own tests: feed it real result samples and check that cursors, ids and statuses stay visible.
 * It creates no run and executes nothing. `apiKey` needs the agent's scope and one of
 * `runtime:read`, `configuration:read` or `tools:execute`. A refusal throws `GatewayError` (status, code).
 */
export async function dryRun(target: GatewayTarget, request: DryRunRequest): Promise<DryRunResponse> {
  const samples = request.mock_receipts.map((s, i) => ({ ...s, receipt_id: s.receipt_id ?? `dry-run-${i + 1}`, kind: s.kind ?? "completed" }));
  const body = await requestGateway(target, "POST", "/v1/tools/dry-run", { ...request, mock_receipts: samples });
  return DryRunResponseSchema.parse(body);
}
