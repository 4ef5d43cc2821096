import { randomUUID } from "node:crypto";
import { assignmentIdFor, defaultOperationKey, newRunId } from "../../src/execution/model/ids.js";
import { newClaimToken } from "../../src/execution/claims/claim-token.js";
import { buildReceipt, wireReceipt } from "../../src/runner/receipts.js";
import { argumentDigest } from "../../src/wire/digest.js";
import { encode } from "../../src/wire/codec.js";
import { Candidate, Grant, Receipt } from "../../src/wire/messages.js";

/**
 * The one tool call both benchmarks use: its arguments, its single progress report and its small
 * result. `bench:jetstream` measures the engine with the encoded sizes of these messages and
 * `bench:e2e` sends exactly these through the gateway, so the two sets of figures line up.
 */
export const BENCH_TOOL = { name: "tasks.read", bindingId: "bench-read", scope: "bench", agent: "bench-agent" } as const;
export const BENCH_ARGUMENTS = { cursor: "page-1", filter: { status: "open" }, limit: 20 };
export const BENCH_PROGRESS = { step: 1, of: 2, note: "page fetched" };
export const BENCH_RESULT = {
  next_cursor: "page-2",
  total: 42,
  tasks: Array.from({ length: 5 }, (_, i) => ({ id: `task-${i}`, title: `Write the quarterly report, part ${i}`, status: "open" })),
};

export interface ProtocolMessageSizes {
  candidate: number;
  grant: number;
  accepted: number;
  progress: number;
  completed: number;
}

/**
 * Encodes one message of each kind as the gateway and the runner build them (real id, token and
 * receipt-id formats, the runner's receipt builder) and returns their msgpack sizes in bytes.
 */
export function protocolMessageSizes(): ProtocolMessageSizes {
  const runId = newRunId();
  const assignmentId = assignmentIdFor(runId, undefined);
  const candidate = Candidate.parse({
    assignment_id: assignmentId,
    run_id: runId,
    tool_name: BENCH_TOOL.name,
    binding_id: BENCH_TOOL.bindingId,
    generation: 0,
    created_at: Date.now(),
  });
  const grant = Grant.parse({
    assignment_id: assignmentId,
    run_id: runId,
    session_id: randomUUID(),
    executor_id: "bench-exec-0",
    tool_name: BENCH_TOOL.name,
    binding_id: BENCH_TOOL.bindingId,
    tool_kind: "read",
    arguments: BENCH_ARGUMENTS,
    argument_digest: argumentDigest(BENCH_ARGUMENTS),
    subject: "user-42",
    agent: BENCH_TOOL.agent,
    agent_version: `${BENCH_TOOL.agent}.1`,
    toolset: `${BENCH_TOOL.agent}-tools`,
    toolset_version: "v1",
    operation_key: defaultOperationKey(runId, assignmentId),
    claim_token: newClaimToken().token,
    generation: 0,
    lease_expires_at: Date.now() + 30_000,
  });
  const receipt = (content: Parameters<typeof buildReceipt>[1]): Receipt => wireReceipt(buildReceipt(grant, content, Date.now()), grant.claim_token, false);
  return {
    candidate: encode(candidate).length,
    grant: encode({ status: "granted", grant }).length,
    accepted: encode(receipt({ kind: "accepted", operation_key: grant.operation_key, argument_digest: grant.argument_digest })).length,
    progress: encode(receipt({ kind: "progress", seq: 1, progress: BENCH_PROGRESS })).length,
    completed: encode(receipt({ kind: "completed", result: BENCH_RESULT })).length,
  };
}
