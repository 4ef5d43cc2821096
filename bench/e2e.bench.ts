/**
 * `npm run bench:e2e`: full tool calls through toolgate (create over HTTP -> claim -> grant ->
 * accepted, confirmed -> one progress -> completed -> projection stored) with the protocol-level
 * executors (the gateway's own cost) and with the ToolRunner (the SDK's added), at 1, 10 and 100 calls
 * in flight, the JetStream ceiling of the same machine measured first as context.
 *
 * Processes: the gateway as `toolgate serve` from `dist/`, the executors, the producer (HTTP client
 * and completion watch) and nats-server, each its own: none inflates another's latency or profile.
 * Environment: see bench/lib/compare-bench.ts; BENCH_BASELINE_REF=<ref> runs that ref beside this tree.
 */
import { runCompareBench } from "./lib/compare-bench.js";
import { measureJetStreamCeiling } from "./lib/jetstream-ceiling.js";
import { protocolMessageSizes } from "./lib/protocol-messages.js";
import { formatRate } from "./lib/stats.js";

await runCompareBench({
  bench: "e2e",
  defaults: ["toolgate-protocol", "toolgate-runner"],
  async context(log) {
    const sizes = Object.values(protocolMessageSizes());
    const messageBytes = Math.round(sizes.reduce((a, b) => a + b, 0) / sizes.length);
    log(`JetStream ceiling at ${messageBytes} B (mean msgpack size of candidate, grant, accepted, progress, completed)`);
    const c = await measureJetStreamCeiling({ messageBytes, log });
    return [
      `JetStream ceiling, same run, ${messageBytes} B messages: batched publish ${formatRate(c.batchedPublishPerSec)} (${c.batchedInFlight} in flight), sync publish ${formatRate(c.syncPublishPerSec)}, KV CAS ${formatRate(c.kvUpdatePerSec)}, request/reply ${formatRate(c.requestReplyPerSec)} (1 at a time), ${formatRate(c.requestReply10PerSec)} (10)`,
    ];
  },
});
