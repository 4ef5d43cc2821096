import { RequestError, RequestOne } from "@nats-io/nats-core/internal";

/** The part of nats-core's one-answer request this module reaches into (its own methods, public in JavaScript). */
interface AnsweredRequest {
  resolver(err: Error | null, msg: unknown): void;
  cancel(err?: Error): void;
}

const ANSWERED = Symbol("toolgate.answered");

/** Handed to a request that is over already: rejecting its settled promise does nothing, so nobody ever sees it. */
const ALREADY_SETTLED = new RequestError("cancelled");

let installed = false;

/**
 * Stops nats-core building an `Error` for every request that was answered. Its one-answer request
 * settles its promise, then cancels itself, and the cancel rejects the (settled) promise with a new
 * `RequestError("cancelled")`: a stack trace captured per KV write, read and request, and thrown
 * away. That was about 3% of the gateway's CPU (`RequestError` the third function by self time in
 * its profile). A request answered (or failed) by its resolver now gets one shared error, which
 * its settled promise ignores as it ignored the new one; a request cancelled before any answer
 * (a timeout, a failed publish) still gets its own, as before.
 *
 * It wraps two methods of `@nats-io/nats-core` (pinned in package-lock.json) for the whole process;
 * on a release that lacks them nothing is changed and the function says so by returning false.
 */
export function skipSettledRequestErrors(): boolean {
  const proto = RequestOne.prototype as unknown as Partial<AnsweredRequest>;
  if (typeof proto.resolver !== "function" || typeof proto.cancel !== "function") return false;
  if (installed) return true;
  const resolver = proto.resolver;
  const cancel = proto.cancel;
  proto.resolver = function (this: AnsweredRequest & { [ANSWERED]?: true }, err, msg) {
    this[ANSWERED] = true;
    resolver.call(this, err, msg);
  };
  proto.cancel = function (this: AnsweredRequest & { [ANSWERED]?: true }, err) {
    cancel.call(this, err ?? (this[ANSWERED] ? ALREADY_SETTLED : undefined));
  };
  installed = true;
  return true;
}
