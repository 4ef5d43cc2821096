import type { NatsConnection, Subscription } from "@nats-io/transport-node";
import type { z } from "zod";
import type { Logger } from "../../log/logger.js";
import { decode, encode, MalformedMessageError } from "../../wire/codec.js";
import { GATEWAY_QUEUE, isSubjectToken } from "../../wire/subjects.js";

/** Who sent a request: the scope and executor tokens of its subject, which NATS permissions bind to the sender. */
export interface RequestOrigin {
  readonly scope: string;
  readonly executorId: string;
}

/**
 * Serves one request/reply subject of the protocol, `tg.<verb>.<scope>.<executor>`, in the gateways'
 * queue group (each request reaches one replica). Requests are decoded and validated, and their
 * `executor_id` must be the subject's executor token: the server lets an executor publish only on
 * its own tokens, so this is what stops it speaking for another executor of its scope. A malformed
 * request is answered by `onMalformed` when the protocol has an answer for it. A failing handler
 * sends no reply, so the requester's timeout and retry take over.
 */
export function serveRequests<S extends z.ZodType<{ executor_id: string }>>(
  nc: NatsConnection,
  options: {
    /** e.g. `tg.claim.*.*`: the last two tokens are scope and executor. */
    subject: string;
    schema: S;
    log: Logger;
    handle: (origin: RequestOrigin, request: z.output<S>) => Promise<unknown>;
    onMalformed?: (reason: string) => unknown;
  },
): Subscription {
  const { log } = options;
  return nc.subscribe(options.subject, {
    queue: GATEWAY_QUEUE,
    callback: (err, msg) => {
      if (err) return log.error({ err, subject: options.subject }, "subscription failed");
      const [scope = "", executorId = ""] = msg.subject.split(".").slice(2);
      let request: z.output<S>;
      try {
        if (!isSubjectToken(scope) || !isSubjectToken(executorId)) throw new MalformedMessageError(`bad scope or executor token in ${msg.subject}`);
        request = decode(options.schema, msg.data);
        if (request.executor_id !== executorId)
          throw new MalformedMessageError(`executor_id '${request.executor_id}' is not the executor of the subject ('${executorId}')`);
      } catch (e) {
        const reason = e instanceof MalformedMessageError ? e.reason : String(e);
        log.warn({ subject: msg.subject, reason }, "malformed request");
        if (options.onMalformed && msg.reply) msg.respond(encode(options.onMalformed(reason)));
        return;
      }
      options.handle({ scope, executorId }, request).then(
        (reply) => msg.reply && msg.respond(encode(reply)),
        (e: unknown) => log.error({ err: e, subject: msg.subject }, "request failed; no reply sent"),
      );
    },
  });
}
