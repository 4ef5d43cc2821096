/**
 * `npm run bench:jetstream`: the raw JetStream ceiling on this machine (persisted publishes, sync and
 * batched, file storage R1; KV compare-and-set; core request/reply), at the msgpack sizes of the
 * protocol's own messages (encoded here as the gateway and the runner build them), and beside it the
 * NATS CLI's own `nats bench js pub` (sync, and async with as many in flight) on the same spawned
 * server (a random port), so the ceiling is also the engine's own tool's.
 */
import { measureJetStreamCeiling } from "./lib/jetstream-ceiling.js";
import { protocolMessageSizes } from "./lib/protocol-messages.js";
import { formatRate } from "./lib/stats.js";

const log = (line: string) => process.stderr.write(`bench:jetstream: ${line}\n`);
const results = [];
for (const [message, messageBytes] of Object.entries(protocolMessageSizes())) {
  log(`${message}: ${messageBytes} B`);
  results.push({ message, ...(await measureJetStreamCeiling({ messageBytes, log })) });
}
console.log(`nats-server ${results[0]!.serverVersion}, file storage, R1`);
console.log(
  "| message | size | sync publish | `nats bench` sync | batched publish | `nats bench` async | KV CAS update | request/reply (1) | request/reply (10) |",
);
console.log("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
for (const r of results) {
  const bench = (b: { msgsPerSec: number; p99Us: number }) => `${formatRate(b.msgsPerSec)} (p99 ${Math.round(b.p99Us)} µs)`;
  console.log(
    `| ${r.message} | ${r.messageBytes} B | ${formatRate(r.syncPublishPerSec)} | ${bench(r.natsBenchSync)} | ${formatRate(r.batchedPublishPerSec)} (${r.batchedInFlight} in flight) | ${bench(r.natsBenchAsync)} | ${formatRate(r.kvUpdatePerSec)} | ${formatRate(r.requestReplyPerSec)} | ${formatRate(r.requestReply10PerSec)} |`,
  );
}
