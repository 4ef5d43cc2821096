import type { NatsConnection, Subscription } from "@nats-io/transport-node";
import { EXECUTOR_JS_API_PREFIX, GATEWAY_QUEUE } from "../wire/subjects.js";
import { STREAMS } from "../streams/names.js";

/** The only JetStream operations executors use: info and pull of a candidate consumer. */
const OPERATIONS = ["INFO", "MSG.NEXT"] as const;

/** The executors' subject of an operation on a candidate consumer, and `$JS.API`'s, both ending in the consumer's token. */
const executorOperation = (op: (typeof OPERATIONS)[number]) => ({
  from: `${EXECUTOR_JS_API_PREFIX}.CONSUMER.${op}.${STREAMS.candidates}`,
  to: `$JS.API.CONSUMER.${op}.${STREAMS.candidates}`,
});

/**
 * On a server without the generated account layout (local, unsecured) nothing maps the executors'
 * JetStream prefix to `$JS.API`, so the gateway forwards those two operations, keeping the reply
 * subject: JetStream answers the executor directly. Under the account layout the import does this,
 * and on a server configured with `executorJetStreamMappings` its subject mapping does: no message
 * ever reaches these subscriptions.
 */
export function bridgeExecutorJetStreamApi(nc: NatsConnection): Subscription[] {
  return OPERATIONS.map((op) => {
    const { from, to } = executorOperation(op);
    return nc.subscribe(`${from}.*`, {
      queue: GATEWAY_QUEUE,
      callback: (err, msg) => {
        if (err || !msg.reply) return;
        const consumer = msg.subject.slice(from.length + 1);
        nc.publish(`${to}.${consumer}`, msg.data, {
          reply: msg.reply,
          ...(msg.headers ? { headers: msg.headers } : {}),
        });
      },
    });
  });
}

/**
 * nats-server configuration that maps the executors' two operations to `$JS.API` in the server
 * itself, as the account layout's import does: an executor's pull then costs no message through the
 * gateway (two, and a wake-up of the gateway, with the bridge above). The embedded server has it;
 * any unsecured server can take it into its configuration.
 */
export function executorJetStreamMappings(): string {
  const lines = OPERATIONS.map((op) => {
    const { from, to } = executorOperation(op);
    return `  "${from}.*": "${to}.{{wildcard(1)}}"`;
  });
  return `mappings {\n${lines.join("\n")}\n}\n`;
}
