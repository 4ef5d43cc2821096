import type { NatsConnection, Subscription } from "@nats-io/transport-node";
import type { z } from "zod";
import type { Logger } from "../log/logger.js";
import { decode, encode, MalformedMessageError } from "../wire/codec.js";
import { GATEWAY_QUEUE, isSubjectToken } from "../wire/subjects.js";

/**
 * Serves one request/reply subject of the protocol, `tg.<verb>.<scope>`, in the gateways' queue
 * group (each request reaches one replica). Requests are decoded and validated; a malformed one is
 * answered by `onMalformed` when the protocol has an answer for it. A failing handler sends no reply,
 * so the requester's timeout and retry take over.
 */
export function serveRequests<S extends z.ZodType>(
  nc: NatsConnection,
  options: {
    /** e.g. `tg.claim.*`: the last token is the scope. */
    subject: string;
    schema: S;
    log: Logger;
    handle: (scope: string, request: z.output<S>) => Promise<unknown>;
    onMalformed?: (reason: string) => unknown;
  },
): Subscription {
  const { log } = options;
  return nc.subscribe(options.subject, {
    queue: GATEWAY_QUEUE,
    callback: (err, msg) => {
      if (err) return log.error({ err, subject: options.subject }, "subscription failed");
      const scope = msg.subject.slice(msg.subject.lastIndexOf(".") + 1);
      let request: z.output<S>;
      try {
        if (!isSubjectToken(scope)) throw new MalformedMessageError(`bad scope token in ${msg.subject}`);
        request = decode(options.schema, msg.data);
      } catch (e) {
        const reason = e instanceof MalformedMessageError ? e.reason : String(e);
        log.warn({ subject: msg.subject, reason }, "malformed request");
        if (options.onMalformed && msg.reply) msg.respond(encode(options.onMalformed(reason)));
        return;
      }
      options.handle(scope, request).then(
        (reply) => msg.reply && msg.respond(encode(reply)),
        (e: unknown) => log.error({ err: e, subject: msg.subject }, "request failed; no reply sent"),
      );
    },
  });
}
