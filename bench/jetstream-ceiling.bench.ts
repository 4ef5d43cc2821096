/**
 * `npm run bench:jetstream`: the raw JetStream ceiling on this machine (persisted publishes, sync and
 * batched, file storage R1; KV compare-and-set; core request/reply), with the message size the
 * protocol's receipts use.
 */
import { measureJetStreamCeiling } from "./lib/jetstream-ceiling.js";
import { formatRate } from "./lib/stats.js";

const log = (line: string) => process.stderr.write(`bench:jetstream: ${line}\n`);
const results = [];
for (const messageBytes of [256, 1024, 16_384]) {
  log(`message size ${messageBytes} B`);
  results.push(await measureJetStreamCeiling({ messageBytes, log }));
}
console.log("| message | sync publish | batched publish | KV CAS update | request/reply (1) | request/reply (10) |");
console.log("| --- | --- | --- | --- | --- | --- |");
for (const r of results) {
  console.log(
    `| ${r.messageBytes} B | ${formatRate(r.syncPublishPerSec)} | ${formatRate(r.batchedPublishPerSec)} (${r.batchedInFlight} in flight) | ${formatRate(r.kvUpdatePerSec)} | ${formatRate(r.requestReplyPerSec)} | ${formatRate(r.requestReply10PerSec)} |`,
  );
}
