/**
 * `npm run bench:jetstream`: the raw JetStream ceiling on this machine (persisted publishes, sync and
 * batched, file storage R1; KV compare-and-set; core request/reply), at the msgpack sizes of the
 * protocol's own messages (encoded here as the gateway and the runner build them).
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
console.log("| message | size | sync publish | batched publish | KV CAS update | request/reply (1) | request/reply (10) |");
console.log("| --- | --- | --- | --- | --- | --- | --- |");
for (const r of results) {
  console.log(
    `| ${r.message} | ${r.messageBytes} B | ${formatRate(r.syncPublishPerSec)} | ${formatRate(r.batchedPublishPerSec)} (${r.batchedInFlight} in flight) | ${formatRate(r.kvUpdatePerSec)} | ${formatRate(r.requestReplyPerSec)} | ${formatRate(r.requestReply10PerSec)} |`,
  );
}
