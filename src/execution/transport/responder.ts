import type { Msg, MsgHdrs, NatsConnection, Subscription } from "@nats-io/transport-node";
import type { z } from "zod";
import type { Logger } from "../../log/logger.js";
import { decode, encode, MalformedMessageError } from "../../wire/codec.js";
import { GATEWAY_QUEUE, isSubjectToken } from "../../wire/subjects.js";
import { unsupportedProtocolVersion } from "../../wire/protocol-version.js";
import type { RequestOrigin } from "../../executors/admission.js";
import type { ExecutionMetrics } from "../../metrics/metrics.js";
import { EXECUTORS_ACCOUNT } from "../../security/nats-auth.js";
import type { RefusalCode } from "../../wire/messages.js";

/**
 * Set by nats-server on a request that crossed into the gateway's account through a `share: true`
 * service import (the generated authorization): the requesting connection's account and nkey. The
 * server replaces any copy the client sent; on a server without that layout nothing can be trusted.
 */
const REQUEST_INFO_HEADER = "Nats-Request-Info";

/** Refusals that say the requester is not who or where it claims to be, or speaks another protocol: logged at warn, the rest at debug. */
const ADMISSION_CODES: ReadonlySet<RefusalCode> = new Set([
  "malformed",
  "protocol_version_unsupported",
  "executor_unknown",
  "out_of_scope",
  "binding_not_granted",
  "identity_mismatch",
  "not_yours",
  "receipt_conflict",
]);

/** A reply that refuses the request, with its code and reason (what is logged and counted). */
export interface Refusal {
  code: RefusalCode;
  reason: string;
}

/**
 * Serves one request/reply subject of the protocol, `tg.<verb>.<scope>.<executor>`, in the gateways'
 * queue group (each request reaches one replica). Requests are decoded and validated, and their
 * `executor_id` must be the subject's executor token: the server lets an executor publish only on
 * its own tokens, so this is what stops it speaking for another executor of its scope. A request whose
 * `Tg-Protocol` header names another protocol version is answered by `protocol_version_unsupported`
 * before its body is read (one without the header is taken as this version), a malformed one by
 * `malformed`: every request subject answers them, so no requester waits for its timeout. Every
 * refusal, of these or decided by the handler (`refusalOf`), is logged and counted by verb and code.
 * A failing handler sends no reply, so the requester's timeout and retry take over.
 */
export function serveRequests<S extends z.ZodType<{ executor_id: string }>, R>(
  nc: NatsConnection,
  options: {
    /** e.g. `tg.claim.*.*`: the last two tokens are scope and executor. */
    subject: string;
    schema: S;
    log: Logger;
    metrics: ExecutionMetrics;
    handle: (origin: RequestOrigin, request: z.output<S>) => Promise<R>;
    /** The reply refusing a request before it reached `handle` (malformed, or of another protocol version). */
    refuse: (refusal: Refusal) => R;
    /** Headers every reply carries (what this gateway can do, for the requester to learn). */
    replyHeaders?: MsgHdrs;
    /** The refusal a reply stands for, if it is one. */
    refusalOf: (reply: R) => Refusal | undefined;
  },
): Subscription {
  const { log, metrics } = options;
  const verb = options.subject.split(".")[1] ?? options.subject;
  const reply = (msg: Msg, origin: { scope: string; executorId: string }, answer: R) => {
    const refusal = options.refusalOf(answer);
    if (refusal) {
      metrics.requestRefused(verb, refusal.code);
      const line = { subject: msg.subject, scope: origin.scope, executor_id: origin.executorId, code: refusal.code, reason: refusal.reason };
      if (ADMISSION_CODES.has(refusal.code)) log.warn(line, "request refused");
      else log.debug(line, "request refused");
    }
    if (msg.reply) msg.respond(encode(answer), options.replyHeaders ? { headers: options.replyHeaders } : undefined);
  };
  return nc.subscribe(options.subject, {
    queue: GATEWAY_QUEUE,
    callback: (err, msg) => {
      if (err) return log.error({ err, subject: options.subject }, "subscription failed");
      const [scope = "", executorId = ""] = msg.subject.split(".").slice(2);
      const version = unsupportedProtocolVersion(msg.headers);
      if (version) return reply(msg, { scope, executorId }, options.refuse({ code: "protocol_version_unsupported", reason: version }));
      let request: z.output<S>;
      try {
        if (!isSubjectToken(scope) || !isSubjectToken(executorId)) throw new MalformedMessageError(`bad scope or executor token in ${msg.subject}`);
        request = decode(options.schema, msg.data);
        if (request.executor_id !== executorId)
          throw new MalformedMessageError(`executor_id '${request.executor_id}' is not the executor of the subject ('${executorId}')`);
      } catch (e) {
        return reply(msg, { scope, executorId }, options.refuse({ code: "malformed", reason: e instanceof MalformedMessageError ? e.reason : String(e) }));
      }
      const nkey = requesterNkey(msg);
      options.handle({ scope, executorId, ...(nkey ? { nkey } : {}) }, request).then(
        (answer) => reply(msg, { scope, executorId }, answer),
        (e: unknown) => log.error({ err: e, subject: msg.subject }, "request failed; no reply sent"),
      );
    },
  });
}

/** The executor connection's nkey, as nats-server stated it for a request from the executors' account. */
function requesterNkey(msg: Msg): string | undefined {
  const info = msg.headers?.get(REQUEST_INFO_HEADER);
  if (!info) return undefined;
  try {
    const parsed = JSON.parse(info) as { acc?: unknown; user?: unknown };
    return parsed.acc === EXECUTORS_ACCOUNT && typeof parsed.user === "string" ? parsed.user : undefined;
  } catch {
    return undefined;
  }
}
