import { TaskRef, TaskStatus, type Grant } from "../wire/messages.js";
import type { SubmissionRefusalCode } from "../errors/protocol-codes.js";

/** The grant as a handler and the authorize hook see it: everything but the claim token. */
export type ToolGrant = Readonly<Omit<Grant, "claim_token">>;

/** A grant as the product sees it: the claim token stays with the runner. */
export function toolGrant(grant: Grant): ToolGrant {
  const { claim_token: _token, ...rest } = grant;
  return rest;
}

/** What a handler gets for one assignment. */
export interface ToolContext<A = unknown> {
  /** The grant's arguments (digest-checked; parsed by the tool's `arguments` parser when it has one). */
  readonly arguments: A;
  readonly grant: ToolGrant;
  /**
   * Fires when the run is cancelled, the business task is asked to stop, or the runner shuts down
   * (`signal.reason` is a `CancelRequested`). Stop, then throw `BusinessCancelled` to confirm the
   * cancellation, or return to report what was done anyway.
   */
  readonly signal: AbortSignal;
  /**
   * Reports progress: saved in the store when the promise resolves, delivered in order (seq 1, 2...)
   * afterwards. A read running ahead of its confirmation has it resolve once queued behind its claim
   * (saved in the claim's commit). Throws when `data` is not representable as JSON.
   */
  progress(data: unknown): Promise<void>;
  /**
   * Answers the tool call with a business task left running in the background: `return
   * ctx.submit({ task_ref, status })`. The run goes on; report the task's progress and outcome later
   * with `runner.tasks` by `task_ref` (docs/async-tasks.md). Throws `SubmissionRefused` for a
   * reference or status the protocol does not take (empty, or too long: `submission_too_large`).
   */
  submit(task: { task_ref: string; status: string }): Submission;
}

const SUBMISSION = Symbol.for("toolgate.Submission");

/** What `ctx.submit` returns and a handler returns in turn: the task it left running. */
export interface Submission {
  readonly [SUBMISSION]: true;
  readonly task_ref: string;
  readonly status: string;
}

/** A handler's return value that is a submission (branded, so a product bundling two copies of toolgate still submits). */
export function isSubmission(value: unknown): value is Submission {
  return typeof value === "object" && value !== null && SUBMISSION in value;
}

/** Builds a submission, or throws `SubmissionRefused` with the protocol's reason. */
export function submission(task: { task_ref: string; status: string }): Submission {
  const ref = TaskRef.safeParse(task.task_ref);
  if (!ref.success) throw new SubmissionRefused("invalid_task_ref", `task_ref: ${ref.error.issues[0]?.message ?? "invalid"}`);
  const status = TaskStatus.safeParse(task.status);
  if (!status.success)
    throw new SubmissionRefused(
      status.error.issues[0]?.message.startsWith("submission_too_large") ? "submission_too_large" : "invalid_status",
      `status: ${status.error.issues[0]?.message ?? "invalid"}`,
    );
  return { [SUBMISSION]: true, task_ref: task.task_ref, status: task.status };
}

/** A submission the protocol refuses (the handler sees it at `ctx.submit`, before anything is sent). */
export class SubmissionRefused extends Error {
  override readonly name = "SubmissionRefused";
  constructor(
    readonly code: SubmissionRefusalCode,
    message: string,
  ) {
    super(message);
  }
}

/** A submitted task as `cancelTask` and `runner.tasks.list()` show it. */
export interface SubmittedTaskInfo {
  readonly task_ref: string;
  readonly status: string;
  readonly grant: ToolGrant;
}

/** Why the product is asked about a submitted task: a business-task cancel (stop it), or its run ended (its later receipts are late). */
export interface TaskStopRequest extends SubmittedTaskInfo {
  readonly kind: "task_cancel_requested" | "run_cancelled";
  readonly reason: string;
}

/** What a write tool's `compensate` handler gets: the assignment of the compensation, and what it undoes. */
export interface CompensationContext<A = unknown> extends ToolContext<A> {
  /** The completed write to undo: its assignment id, operation key and completed result. */
  readonly compensates: NonNullable<Grant["compensates"]>;
}

export interface ToolDefinition<A = unknown> {
  /** Must match the tool's kind in the grant; a mismatch is refused before anything runs. */
  kind: "read" | "write";
  /** The execution binding (registered with the gateway) this tool's candidates arrive on. */
  bindingId: string;
  /**
   * Runs the business. Return value: `completed`. `BusinessFailure` / `BusinessCancelled`: `failed` /
   * `cancelled`. Anything else thrown: `reconciliation_required` (the business may have happened).
   * For a write tool, use `ctx.grant.operation_key` as the idempotency key in your own system.
   */
  handler(ctx: ToolContext<A>): unknown;
  /**
   * Write tools: undoes a completed call (a compensation, its own assignment with the operation key
   * `<original>/compensate`). Same outcome model as `handler`; the arguments are the original's.
   * Without it, compensations of this tool are refused (`compensation_unsupported`).
   */
  compensate?(ctx: CompensationContext<A>): unknown;
  /**
   * For a tool whose handler submits tasks: called when a submitted task should stop (a business-task
   * cancel) or its run ended. Stop it in the product, then report `runner.tasks.cancelled(task_ref)`
   * (or `complete` if it finished first: whichever the gateway takes first is the outcome).
   */
  cancelTask?(request: TaskStopRequest): void | Promise<void>;
  /** Parses the arguments before `authorize` (a zod schema fits); a throw refuses with `invalid_arguments`. */
  arguments?: { parse(value: unknown): A };
}

/** What `authorize` gets: the whole grant (subject, agent, versions, digest, tool, arguments, operation key...). */
export type AuthorizeRequest = ToolGrant;

/** `true` allows; `false` or `{ allowed: false, reason }` refuses with `authorization_refused`. */
export type AuthorizeDecision = boolean | { allowed: boolean; reason?: string };

export type Authorize = (request: AuthorizeRequest) => AuthorizeDecision | Promise<AuthorizeDecision>;

/** Why `ctx.signal` fired. */
export class CancelRequested extends Error {
  override readonly name = "AbortError";
  constructor(
    /** `claim_refused`: a read started before its `accepted` was answered, and the gateway refused the claim (its outcome is never sent). */
    readonly kind: "run_cancelled" | "task_cancel_requested" | "shutdown" | "claim_refused",
    message: string,
  ) {
    super(message);
  }
}

/** How the product settles a `reconciliation_required` assignment after checking its own system. */
export type ReconcileOutcome =
  { kind: "completed"; result: unknown } | { kind: "failed"; code: string; message: string } | { kind: "cancelled"; reason: string };
