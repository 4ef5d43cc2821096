import { createHash } from "node:crypto";
import { randomBase64url } from "./random-text.js";

/**
 * Ids the execution path assigns. All are subject/KV tokens (`[A-Za-z0-9_-]`). An assignment created
 * with the runtime's `tool_call_id` gets an id derived from run and tool call, so a retried creation
 * lands on the same key and `kv.create` makes it idempotent.
 */
export function newRunId(): string {
  return `run_${randomBase64url(16)}`;
}

/** The run a session's MCP clients share: derived from the session, so every connection and gateway process finds the same one. */
export function sessionMcpRunId(sessionId: string): string {
  return `run_mcp_${createHash("sha256").update(sessionId, "utf8").digest("base64url").slice(0, 32)}`;
}

export function assignmentIdFor(runId: string, toolCallId: string | undefined): string {
  if (toolCallId === undefined) return `asg_${randomBase64url(16)}`;
  return `asg_${createHash("sha256").update(`${runId}\n${toolCallId}`, "utf8").digest("base64url").slice(0, 32)}`;
}

/** The default operation key: stable for the tool call, so a product can deduplicate side effects on it. */
export function defaultOperationKey(runId: string, assignmentId: string): string {
  return `${runId}/${assignmentId}`;
}
