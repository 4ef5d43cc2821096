import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { canonicalJson } from "../budget/canonical-json.js";
import { isMultimodal } from "../budget/multimodal.js";
import type { AssignmentView } from "../execution/runs/views.js";

/** A tool error the model reads and can act on: `isError` with the code and what to do. */
export function toolError(code: string, message: string, details?: unknown): CallToolResult {
  return { isError: true, content: [{ type: "text", text: canonicalJson({ error: { code, message, ...(details === undefined ? {} : { details }) } }) }] };
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * The answer to `tools/call` for a settled assignment. A completed one is exactly the stored
 * projection the history shows: a multimodal result's blocks as they are (images passed through),
 * any other result as one text block of its canonical JSON, and as `structuredContent` when it is an
 * object. A cut result's structured form is its preview (the same bytes), which the listed
 * `outputSchema` allows beside the tool's own: an MCP client that checks structured content against
 * the schema then accepts it instead of failing the call. A submitted background task is answered
 * with its submission (what the history shows), as text only: it is not the tool's output, and
 * `_meta` names the task. Every other state is an error, never a success.
 */
export function callResult(view: AssignmentView): CallToolResult {
  if (view.state === "submitted" && view.task && view.context_preview) {
    const task = { task_ref: view.task.task_ref, status: view.task.status, state: "submitted" };
    return {
      content: [{ type: "text", text: canonicalJson(view.context_preview.result) }],
      _meta: { "io.toolgate/assignment_id": view.assignment_id, "io.toolgate/task": task },
    };
  }
  const preview = view.state === "completed" ? view.context_preview : null;
  if (!preview) {
    const outcome = view.outcome;
    const details = { state: view.state, assignment_id: view.assignment_id };
    if (outcome && outcome.kind !== "cancelled") return toolError(outcome.error.code, outcome.error.message, details);
    return toolError(view.state, outcome?.kind === "cancelled" ? outcome.reason : `the tool call ended ${view.state} without a result`, details);
  }
  const meta = { _meta: { "io.toolgate/assignment_id": view.assignment_id, "io.toolgate/truncated": preview.truncated } };
  const result = preview.result;
  if (isMultimodal(result)) {
    const { content, structuredContent, isError } = result as { content: CallToolResult["content"]; structuredContent?: unknown; isError?: unknown };
    return { content, ...(isObject(structuredContent) ? { structuredContent } : {}), ...(isError === true ? { isError: true } : {}), ...meta };
  }
  return { content: [{ type: "text", text: canonicalJson(result) }], ...(isObject(result) ? { structuredContent: result } : {}), ...meta };
}
