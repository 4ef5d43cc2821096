/**
 * Every error `code` toolgate raises, declared once with the HTTP status it answers with and what it
 * means for the caller. Domain code raises a code (`ToolgateError`, the compiler rejects an undeclared
 * one) and never a status: only the HTTP layer reads `status` (`httpStatus` in src/http/errors.ts).
 * The table in docs/http-api.md is rendered from this list (a test keeps the two equal).
 */
export const HTTP_ERRORS = {
  validation_failed: { status: 400, meaning: "the request does not match its schema or rules; `details` names each field, the rule and what is allowed" },
  invalid_json: { status: 400, meaning: "the body is not valid JSON" },
  invalid_utf8: { status: 400, meaning: "the body is not valid UTF-8: send JSON encoded as UTF-8" },
  submission_too_large: {
    status: 400,
    meaning:
      "a submission's `task_ref` or `status` is over its byte bound (a submission enters history whole, so it is bounded instead of cut); `details` names the field and the bound",
  },
  json_too_deep: { status: 400, meaning: "the body nests arrays/objects deeper than `TOOLGATE_JSON_MAX_DEPTH`" },
  mcp_session_required: {
    status: 400,
    meaning:
      "a 2025-11-25 MCP request without the `Mcp-Session-Id` of an open MCP session, and not an initialize request: initialize first (2026-07-28 requests need no session)",
  },
  unauthenticated: { status: 401, meaning: "no API key, or an unknown one: send `Authorization: Bearer <key>`" },
  permission_denied: { status: 403, meaning: "the identity lacks every permission the route accepts" },
  agent_out_of_scope: { status: 403, meaning: "the identity is not scoped to the agent the request targets" },
  route_not_found: { status: 404, meaning: "no route has this method and path" },
  binding_not_found: { status: 404, meaning: "no binding has this id" },
  toolset_version_not_found: { status: 404, meaning: "the toolset has no published version with this id" },
  agent_version_not_found: { status: 404, meaning: "no agent version has this id" },
  session_not_found: { status: 404, meaning: "no session has this id" },
  run_not_found: { status: 404, meaning: "no run has this id" },
  assignment_not_found: { status: 404, meaning: "no assignment (tool call) has this id" },
  tool_not_found: { status: 404, meaning: "the agent version's pinned toolset has no tool of this name" },
  executor_not_found: { status: 404, meaning: "no executor is registered with this id" },
  mcp_session_not_found: {
    status: 404,
    meaning: "no MCP session with this `Mcp-Session-Id` is open on this session (ended, evicted, or another replica's): initialize a new one",
  },
  already_published: { status: 409, meaning: "this version id is published with other content; versions are immutable, publish a new id" },
  executor_exists: { status: 409, meaning: "the executor id is registered with other keys, scope or bindings: change them with PUT, not POST" },
  run_terminated: { status: 409, meaning: "the run has ended; it takes no new tool calls or settlements" },
  idempotency_conflict: { status: 409, meaning: "this `tool_call_id` was created before with another tool, arguments or operation key" },
  task_not_running: { status: 409, meaning: "a task cancel needs confirmed work: a running assignment, or a submitted background task" },
  not_completed: { status: 409, meaning: "only a completed write can be compensated" },
  read_not_compensable: { status: 409, meaning: "a read tool has no side effect to compensate" },
  compensation_not_compensable: { status: 409, meaning: "a compensation is not itself compensated" },
  not_reconciliation_required: { status: 409, meaning: "only a reconciliation_required assignment can be settled by an operator" },
  receipt_conflict: { status: 409, meaning: "the assignment already has a different final receipt" },
  payload_too_large: { status: 413, meaning: "the body exceeds `TOOLGATE_HTTP_BODY_LIMIT`" },
  unsupported_media_type: { status: 415, meaning: "the body is not `application/json`" },
  rate_limited: { status: 429, meaning: "the identity's request rate is exceeded; retry after `Retry-After` seconds" },
  internal: { status: 500, meaning: "an unexpected failure; the gateway's log has the cause" },
  binding_missing: { status: 500, meaning: "stored configuration names a binding that is gone" },
  toolset_version_missing: { status: 500, meaning: "stored configuration names a toolset version that is gone" },
  agent_version_missing: { status: 500, meaning: "a session or run names an agent version that is gone" },
  assignment_missing: { status: 500, meaning: "a run names an assignment that is gone" },
  compensation_missing: { status: 500, meaning: "a write names a compensation that is gone" },
  run_id_collision: { status: 500, meaning: "a freshly drawn run id was taken; retry" },
  invalid_input_schema: { status: 500, meaning: "the tool's stored `input_schema` does not compile" },
  invalid_stored_schema: { status: 500, meaning: "the tool's stored `input_schema` does not compile (dry-run)" },
  not_ready: { status: 503, meaning: "not connected to NATS or a declared stream is missing; retry later" },
} as const satisfies Record<string, { status: number; meaning: string }>;

export type HttpErrorCode = keyof typeof HTTP_ERRORS;

/** The error-code table of docs/http-api.md. */
export function renderErrorTable(): string {
  const rows = (Object.entries(HTTP_ERRORS) as [HttpErrorCode, { status: number; meaning: string }][]).map(
    ([code, e]) => `| ${e.status} | \`${code}\` | ${e.meaning} |`,
  );
  return ["| status | code | meaning |", "| --- | --- | --- |", ...rows].join("\n");
}
