import type { Grant } from "../wire/messages.js";

/** The grant as a handler and the authorize hook see it: everything but the claim token. */
export type ToolGrant = Readonly<Omit<Grant, "claim_token">>;

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
   * afterwards. Throws when `data` is not representable as JSON.
   */
  progress(data: unknown): Promise<void>;
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
    readonly kind: "run_cancelled" | "task_cancel_requested" | "shutdown",
    message: string,
  ) {
    super(message);
  }
}

/** How the product settles a `reconciliation_required` assignment after checking its own system. */
export type ReconcileOutcome =
  | { kind: "completed"; result: unknown }
  | { kind: "failed"; code: string; message: string }
  | { kind: "cancelled"; reason: string };
