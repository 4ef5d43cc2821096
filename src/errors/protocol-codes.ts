/**
 * Every code of the executor protocol, declared once: who sends it, where it travels, what it means
 * and what the receiver does. The wire's `RefusalCode` enum is built from `REFUSAL_CODES`' keys, and
 * the ToolRunner and the gateway type the `error.code`s they write by `RunnerCode` / `GatewayOutcomeCode`,
 * so the compiler rejects an undeclared one. The tables of docs/protocol.md are rendered from here
 * (a test keeps them equal). HTTP error codes are a separate list: `HTTP_ERRORS` in ./catalogue.ts.
 */

/** Where a gateway refusal code travels: the reply of a request subject, or a receipt's answer. */
type RefusalSite = "claim" | "presence" | "held" | "receipt" | "rq" | "ctlq";
interface RefusalEntry {
  in: readonly RefusalSite[];
  meaning: string;
  action: string;
}

/**
 * The gateway's answers to an executor on NATS: the `code` of a refused request (`RequestRefused`,
 * `PresenceReply`) and of a `rejected` or `late_ignored` receipt answer (`ReceiptAnswer`).
 */
export const REFUSAL_CODES = {
  already_claimed: { in: ["claim"], meaning: "another executor holds the assignment's claim", action: "drop the candidate" },
  not_found: {
    in: ["claim", "presence", "receipt"],
    meaning: "the assignment does not exist; for a heartbeat, a declared binding is not registered",
    action: "drop the candidate or receipt; register the binding or stop declaring it",
  },
  stale_generation: {
    in: ["claim"],
    meaning: "the candidate is of an earlier generation than the assignment",
    action: "drop the candidate: the current one is offered anew",
  },
  executor_offline: { in: ["claim"], meaning: "the executor has no live presence in its scope", action: "send a heartbeat, then claim again" },
  out_of_scope: {
    in: ["claim", "presence", "held", "receipt"],
    meaning: "the executor, binding or assignment belongs to another scope than the subject's",
    action: "fix the executor's scope or bindings; stop pulling",
  },
  run_terminated: {
    in: ["claim", "receipt"],
    meaning: "the run has ended: a claim or `accepted` is `rejected`, any other receipt is `late_ignored` (stored, changes nothing)",
    action: "do not start; stop the handler, its later receipts are late",
  },
  withdrawn: { in: ["claim"], meaning: "the assignment was withdrawn when its run ended", action: "drop the candidate" },
  too_many_claims: {
    in: ["claim"],
    meaning: "the executor holds `TOOLGATE_MAX_CLAIMS_PER_EXECUTOR` claims, or the claim took too long to be made",
    action: "release the candidate and claim again later",
  },
  claim_revoked: { in: ["claim"], meaning: "the claim was revoked (the run was cancelled before `accepted`)", action: "do not start" },
  lease_expired: {
    in: ["receipt"],
    meaning: "the claim's lease ran out; the assignment went back to the candidates",
    action: "do not start (the token belongs to an earlier generation)",
  },
  invalid_token: {
    in: ["receipt"],
    meaning: "no claim of the assignment by this executor matches the claim token; not indexed",
    action: "none: the receipt is not this executor's to send",
  },
  protocol_version_unsupported: {
    in: ["claim", "presence", "held", "rq", "ctlq"],
    meaning:
      "the request's `Tg-Protocol` header names a protocol version this gateway does not speak (it speaks `1`); a request without the header is taken as `1`",
    action: "run an executor of the gateway's protocol version, or upgrade the gateway first",
  },
  malformed: {
    in: ["claim", "presence", "held", "receipt", "rq", "ctlq"],
    meaning: "not the subject's message, or its `executor_id`, scope or assignment is not the subject's",
    action: "fix the sender (a bug in the executor)",
  },
  receipt_conflict: {
    in: ["receipt", "rq"],
    meaning: "the same `receipt_id` was stored with another body",
    action: "never resend it with a new body: the executor or its store changed a saved receipt",
  },
  invalid_result: { in: ["receipt"], meaning: "the receipt is not representable as canonical JSON (NaN, Infinity, binary...)", action: "report a JSON result" },
  illegal_transition: {
    in: ["receipt"],
    meaning: "the assignment's state table has no edge for this receipt (e.g. a second final receipt, progress before `accepted` was confirmed)",
    action: "none: the assignment's state stands",
  },
  progress_conflict: {
    in: ["receipt"],
    meaning: "another receipt already reported this progress `seq` with another body",
    action: "number progress once per claim",
  },
  argument_digest_mismatch: {
    in: ["receipt"],
    meaning: "`accepted` names other arguments than the assignment's: the grant was altered on its way",
    action: "do not start",
  },
  executor_unknown: {
    in: ["claim", "presence", "held"],
    meaning: "the registry has no executor of this id",
    action: "register it with `POST /v1/executors`; stop pulling",
  },
  binding_not_granted: {
    in: ["claim", "presence"],
    meaning: "the registry does not grant the executor a binding it declares",
    action: "grant it with `PUT /v1/executors/{id}` or stop declaring it",
  },
  identity_mismatch: {
    in: ["claim", "presence", "held"],
    meaning: "the request did not come from a NATS connection of one of the executor's registered nkeys",
    action: "connect with a registered nkey",
  },
  executor_detached: { in: ["presence"], meaning: "an operator detached the executor", action: "stop; it may come back once its presence lapsed" },
  not_yours: {
    in: ["rq"],
    meaning: "the queried receipt was stored by another executor's claim or assignment; nothing of it is told",
    action: "none: ask only about this executor's receipts",
  },
} as const satisfies Record<string, RefusalEntry>;

export type RefusalCodeName = keyof typeof REFUSAL_CODES;
/** The keys as a non-empty tuple, for `z.enum`. */
export const REFUSAL_CODE_NAMES = Object.keys(REFUSAL_CODES) as [RefusalCodeName, ...RefusalCodeName[]];

/** How the ToolRunner uses a code: the receipt kind it is the `error.code` of, or the error `ctx.submit` throws. */
type RunnerSite = "refused" | "failed" | "reconciliation_required" | "SubmissionRefused";
interface OutcomeEntry<Site> {
  in: Site;
  meaning: string;
  action: string;
}

/**
 * The `error.code`s the ToolRunner itself writes (a product's `BusinessFailure` and `reconcile` codes are
 * its own; the MCP executor's are declared here), and the codes `ctx.submit` refuses a submission with
 * before anything is sent.
 */
export const RUNNER_CODES = {
  tool_kind_mismatch: {
    in: "refused",
    meaning: "the grant's tool kind is not the one the executor registered",
    action: "register the tool with the binding's kind",
  },
  compensation_unsupported: {
    in: "refused",
    meaning: "a compensation of a tool without a `compensate` handler",
    action: "add `compensate` to the tool, or settle the write otherwise",
  },
  argument_digest_mismatch: {
    in: "refused",
    meaning: "the arguments do not match the grant's `argument_digest`",
    action: "none: the grant was altered on its way; nothing ran",
  },
  invalid_arguments: { in: "refused", meaning: "the tool's `arguments` parser threw", action: "align the tool's input schema and parser" },
  authorization_refused: { in: "refused", meaning: "the product's `authorize` hook refused the grant", action: "none: a decision of the product" },
  authorization_error: { in: "refused", meaning: "the product's `authorize` hook threw", action: "fix the hook; nothing ran" },
  tool_unavailable: {
    in: "failed",
    meaning: "a confirmed claim's tool is not registered in this executor (any more), or its arguments no longer parse",
    action: "deploy the tool; nothing ran",
  },
  handler_error: {
    in: "reconciliation_required",
    meaning: "the handler threw something other than `BusinessFailure` / `BusinessCancelled`: what it did is unknown",
    action: "check the product, then settle (`runner.reconcile` or the operator route)",
  },
  unrepresentable_result: {
    in: "reconciliation_required",
    meaning: "the handler's result is not representable as JSON, yet it may have done its work",
    action: "check the product, then settle; return JSON",
  },
  executor_shutdown: {
    in: "reconciliation_required",
    meaning: "the handler was still running when the shutdown deadline passed, or submitted after the runner closed",
    action: "check the product, then settle",
  },
  executor_restarted: {
    in: "reconciliation_required",
    meaning: "the executor stopped while a write handler was running",
    action: "check the product, then settle",
  },
  task_ref_in_use: {
    in: "reconciliation_required",
    meaning: "the handler submitted a `task_ref` that already names another submitted task of this executor",
    action: "check the product, then settle; use one `task_ref` per task",
  },
  invalid_submission: {
    in: "reconciliation_required",
    meaning: "the handler returned a submission `ctx.submit` did not make, and it is invalid: a task may have started",
    action: "check the product, then settle; submit with `ctx.submit`",
  },
  mcp_tool_error: {
    in: "failed",
    meaning: "the MCP executor: the MCP server answered the call with `isError: true`; the message is its text",
    action: "none: the tool's confirmed failure",
  },
  mcp_error: {
    in: "failed",
    meaning: "the MCP executor: a read's MCP call failed (an error answer, a timeout, the server gone); a write's is `handler_error`",
    action: "check the MCP server; nothing to undo",
  },
  invalid_task_ref: { in: "SubmissionRefused", meaning: "`task_ref` is empty or over its byte bound", action: "submit a shorter reference" },
  invalid_status: { in: "SubmissionRefused", meaning: "`status` is empty", action: "submit a status" },
  submission_too_large: { in: "SubmissionRefused", meaning: "`status` is over its byte bound", action: "submit a shorter status" },
} as const satisfies Record<string, OutcomeEntry<RunnerSite>>;

export type RunnerCode = keyof typeof RUNNER_CODES;
/** The codes `ctx.submit` throws `SubmissionRefused` with. */
export type SubmissionRefusalCode = { [C in RunnerCode]: (typeof RUNNER_CODES)[C]["in"] extends "SubmissionRefused" ? C : never }[RunnerCode];
/** An `error` the ToolRunner writes into a receipt. */
export interface RunnerError {
  code: RunnerCode;
  message: string;
}

/** The `error.code`s the gateway writes into an assignment's outcome itself, with no executor receipt. */
export const GATEWAY_OUTCOME_CODES = {
  task_deadline_passed: {
    in: "reconciliation_required",
    meaning: "a submitted task sent no final receipt within its tool's task deadline",
    action: "check the product, then settle with the operator route",
  },
  executor_detached: {
    in: "reconciliation_required",
    meaning: "the executor was detached (by an operator, by its presence lapsing, or by its held-claims report leaving the claim out) while a write ran",
    action: "the executor's `runner.reconcile` or the operator route settles it",
  },
} as const satisfies Record<string, OutcomeEntry<"reconciliation_required">>;

export type GatewayOutcomeCode = keyof typeof GATEWAY_OUTCOME_CODES;
/** An `error` the gateway writes into an assignment's outcome. */
export interface GatewayOutcomeError {
  code: GatewayOutcomeCode;
  message: string;
}

const row = (cells: readonly string[]) => `| ${cells.join(" | ")} |`;
const table = (head: readonly string[], rows: readonly (readonly string[])[]) => [row(head), row(head.map(() => "---")), ...rows.map(row)].join("\n");

/** The code tables of docs/protocol.md. */
export function renderProtocolCodeTables(): string {
  const refusals = Object.entries(REFUSAL_CODES).map(([code, e]) => [`\`${code}\``, e.in.map((s) => `\`${s}\``).join(", "), e.meaning, e.action]);
  const outcomes = (codes: Record<string, OutcomeEntry<string>>) =>
    Object.entries(codes).map(([code, e]) => [`\`${code}\``, `\`${e.in}\``, e.meaning, e.action]);
  return [
    "Gateway answers to an executor (`code` of a refused request or of a receipt answer):",
    "",
    table(["code", "in", "meaning", "what to do"], refusals),
    "",
    "ToolRunner codes, the MCP executor's included (`error.code` of the receipt kind it writes; `SubmissionRefused`: thrown by `ctx.submit`):",
    "",
    table(["code", "in", "meaning", "what to do"], outcomes(RUNNER_CODES)),
    "",
    "Gateway outcome codes (`error.code` the gateway writes into an assignment itself):",
    "",
    table(["code", "outcome", "meaning", "what to do"], outcomes(GATEWAY_OUTCOME_CODES)),
  ].join("\n");
}
