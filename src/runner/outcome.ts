import type { Grant } from "../wire/messages.js";
import { buildReceipt, UnrepresentableValueError, type FinalReport } from "./receipts.js";
import type { OutboxReceipt } from "./store.js";
import type { RunnerCode, RunnerError } from "../errors/protocol-codes.js";

// Brands instead of `instanceof` alone: a product bundling two copies of toolgate still gets its
// confirmed failures recognised rather than turned into reconciliation.
const FAILURE = Symbol.for("toolgate.BusinessFailure");
const CANCELLED = Symbol.for("toolgate.BusinessCancelled");

/**
 * Thrown by a handler to report a business failure the product has confirmed (nothing was done, or
 * what was done is known): the assignment ends `failed` with this code and message.
 */
export class BusinessFailure extends Error {
  override readonly name = "BusinessFailure";
  readonly [FAILURE] = true;
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Thrown by a handler that stopped its business task on request (`ctx.signal`) and confirms that it
 * is cancelled: the assignment ends `cancelled`.
 */
export class BusinessCancelled extends Error {
  override readonly name = "BusinessCancelled";
  readonly [CANCELLED] = true;
  constructor(readonly reason: string) {
    super(reason);
  }
}

function isBusinessFailure(err: unknown): err is BusinessFailure {
  return typeof err === "object" && err !== null && FAILURE in err;
}

function isBusinessCancelled(err: unknown): err is BusinessCancelled {
  return typeof err === "object" && err !== null && CANCELLED in err;
}

/**
 * What a handler's outcome means. An ordinary exception says nothing about what the business did
 * (it may have written before failing), so it is `reconciliation_required`, never `failed`.
 */
export function reportOf(outcome: PromiseSettledResult<unknown>): FinalReport {
  if (outcome.status === "fulfilled") return { kind: "completed", result: outcome.value };
  const err = outcome.reason;
  if (isBusinessFailure(err)) return { kind: "failed", error: { code: err.code, message: err.message } };
  if (isBusinessCancelled(err)) return { kind: "cancelled", reason: err.reason };
  return { kind: "reconciliation_required", error: describeError("handler_error", err) };
}

/** Code and message of an unexpected error (never its stack: receipts end up in history). */
export function describeError(code: RunnerCode, err: unknown): RunnerError {
  if (!(err instanceof Error)) return { code, message: `non-error thrown: ${String(err)}` };
  const errno = (err as { code?: unknown }).code;
  return { code, message: `${err.name}${typeof errno === "string" ? ` [${errno}]` : ""}: ${err.message}` };
}

/**
 * The outbox entry of a handler's final report. A result that is not representable as JSON cannot
 * be reported, yet the handler may have done its work: that is reconciliation too.
 */
export function finalReceipt(grant: Grant, report: FinalReport, now: number, rerun?: string): OutboxReceipt {
  try {
    return buildReceipt(grant, report, now, rerun);
  } catch (err) {
    if (!(err instanceof UnrepresentableValueError)) throw err;
    return buildReceipt(grant, { kind: "reconciliation_required", error: describeError("unrepresentable_result", err) }, now, rerun);
  }
}
