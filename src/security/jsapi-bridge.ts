import type { NatsConnection, Subscription } from "@nats-io/transport-node";
import { EXECUTOR_JS_API_PREFIX, GATEWAY_QUEUE } from "../wire/subjects.js";
import { STREAMS } from "../streams/names.js";

/** The only JetStream operations executors use: info and pull of a candidate consumer. */
const OPERATIONS = ["INFO", "MSG.NEXT"] as const;

/**
 * On a server without the generated account layout (local, unsecured) nothing maps the executors'
 * JetStream prefix to `$JS.API`, so the gateway forwards those two operations, keeping the reply
 * subject: JetStream answers the executor directly. Under the account layout the import does this and
 * no message ever reaches these subscriptions.
 */
export function bridgeExecutorJetStreamApi(nc: NatsConnection): Subscription[] {
  return OPERATIONS.map((op) => {
    const from = `${EXECUTOR_JS_API_PREFIX}.CONSUMER.${op}.${STREAMS.candidates}`;
    return nc.subscribe(`${from}.*`, {
      queue: GATEWAY_QUEUE,
      callback: (err, msg) => {
        if (err || !msg.reply) return;
        const consumer = msg.subject.slice(from.length + 1);
        nc.publish(`$JS.API.CONSUMER.${op}.${STREAMS.candidates}.${consumer}`, msg.data, {
          reply: msg.reply,
          ...(msg.headers ? { headers: msg.headers } : {}),
        });
      },
    });
  });
}
