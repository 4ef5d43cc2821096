import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { BusinessCancelled, BusinessFailure } from "../runner/outcome.js";
import { errorText } from "../runner/logger.js";
import { McpCallNotSent } from "./connection.js";
import type { ToolKind } from "./tool-mapping.js";

/** A receipt's error message is at most 4096 characters. */
const MAX_MESSAGE = 4_000;

/**
 * What an MCP answer means for the receipt. `isError: true` is the server's confirmed failure:
 * `failed`, its text blocks as the message. Anything else is the `completed` result as the server
 * gave it (content blocks, `structuredContent`), so the gateway's multimodal budget cuts its text
 * blocks and keeps images, audio and resources whole.
 */
export function resultOutcome(result: CallToolResult): CallToolResult {
  if (result.isError !== true) return result;
  throw new BusinessFailure("mcp_tool_error", clip(resultText(result) || "the MCP tool reported an error without text"));
}

/**
 * What a call that threw means (the connection-lost case of a read is retried before this).
 * - Never sent (cancelled while the server was away): `cancelled`, whatever the kind.
 * - Cancelled mid-call (the SDK sent `notifications/cancelled`; a server answers nothing to a
 *   cancelled request): a read is `cancelled`; a write may have happened, so it is an ordinary
 *   error, which the ToolRunner reports `reconciliation_required`.
 * - Any other error (an MCP error answer, a timeout, the server gone mid-call): a read failed
 *   (`mcp_error`, nothing to undo); a write's outcome is unknown: `reconciliation_required`.
 */
export function errorOutcome(err: unknown, kind: ToolKind, signal: AbortSignal): Error {
  if (err instanceof McpCallNotSent) return new BusinessCancelled(reasonOf(signal) ?? err.message);
  if (signal.aborted) {
    const reason = reasonOf(signal) ?? "cancelled";
    if (kind === "read") return new BusinessCancelled(reason);
    return new Error(
      `cancelled mid-call (${reason}); the MCP server was sent notifications/cancelled and answers nothing, so whether the write happened is unknown`,
    );
  }
  if (kind === "read") return new BusinessFailure("mcp_error", clip(errorText(err)));
  return err instanceof Error ? err : new Error(String(err));
}

function resultText(result: CallToolResult): string {
  return result.content
    .flatMap((block) => (block.type === "text" ? [block.text] : []))
    .join("\n")
    .trim();
}

function reasonOf(signal: AbortSignal): string | undefined {
  const reason: unknown = signal.reason;
  return reason instanceof Error ? reason.message : reason === undefined ? undefined : String(reason);
}

function clip(text: string): string {
  return text.length <= MAX_MESSAGE ? text : `${text.slice(0, MAX_MESSAGE)}… (${text.length - MAX_MESSAGE} characters more)`;
}
