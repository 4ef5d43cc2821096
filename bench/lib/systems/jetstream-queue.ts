/** The raw JetStream peer (bench/lib/systems/jetstream-queue-process.ts) on its own nats-server. */
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { AckPolicy, RetentionPolicy, StorageType } from "@nats-io/jetstream";
import { startBenchNats } from "../bench-nats.js";
import { startNatsPeer } from "./peer.js";
import type { BenchSystem } from "./system.js";

/** Its streams, subjects and consumer. */
export const JETSTREAM_QUEUE = {
  calls: "BENCH_CALLS",
  callSubject: "bench.calls",
  results: "BENCH_RESULTS",
  resultSubjects: "bench.results.>",
  consumer: "workers",
} as const;

export async function startJetStreamQueue(dir: string, log: (line: string) => void): Promise<BenchSystem> {
  const nats = await startBenchNats(join(dir, "nats"));
  log(`jetstream: work queue ${JETSTREAM_QUEUE.calls} and result stream ${JETSTREAM_QUEUE.results} on ${nats.server.url}`);
  try {
    // File storage, one replica: as toolgate's streams on the same kind of server.
    await nats.jsm.streams.add({
      name: JETSTREAM_QUEUE.calls,
      subjects: [JETSTREAM_QUEUE.callSubject],
      retention: RetentionPolicy.Workqueue,
      storage: StorageType.File,
      num_replicas: 1,
    });
    // Results are kept a minute (nanoseconds): the stream stays small over a long run.
    await nats.jsm.streams.add({
      name: JETSTREAM_QUEUE.results,
      subjects: [JETSTREAM_QUEUE.resultSubjects],
      retention: RetentionPolicy.Limits,
      storage: StorageType.File,
      num_replicas: 1,
      max_age: 60_000_000_000,
    });
    await nats.jsm.consumers.add(JETSTREAM_QUEUE.calls, { durable_name: JETSTREAM_QUEUE.consumer, ack_policy: AckPolicy.Explicit, max_ack_pending: 10_000 });
  } catch (err) {
    await nats.stop();
    throw err;
  }
  return startNatsPeer(nats, {
    id: "jetstream",
    name: "raw JetStream work queue + result stream",
    entry: fileURLToPath(new URL("./jetstream-queue-process.ts", import.meta.url)),
    dir,
  });
}
