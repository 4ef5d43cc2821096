import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstream, jetstreamManager, StorageType, RetentionPolicy } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { startNatsServer } from "../../src/nats/nats-server-process.js";
import { natsBenchPublish, type NatsBenchResult } from "./nats-bench.js";
import { benchNatsBinary } from "./bench-nats.js";
import { runConcurrently } from "./stats.js";

/** The raw engine limits on this machine, in operations per second. */
export interface JetStreamCeiling {
  /** The nats-server measured (`INFO` version). */
  serverVersion: string;
  messageBytes: number;
  syncPublishPerSec: number;
  batchedPublishPerSec: number;
  batchedInFlight: number;
  kvUpdatePerSec: number;
  requestReplyPerSec: number;
  requestReply10PerSec: number;
  /** The NATS CLI's `nats bench js pub` on the same server: the engine's own tool, beside ours. */
  natsBenchSync: NatsBenchResult;
  natsBenchAsync: NatsBenchResult;
}

export interface CeilingOptions {
  messageBytes?: number;
  syncCount?: number;
  batchedCount?: number;
  inFlight?: number;
  log?: (line: string) => void;
}

/**
 * Measures persisted JetStream publishes (file storage, R1; one at a time and with many in flight),
 * KV compare-and-set updates and core request/reply, against a fresh local nats-server, so the figures
 * sit beside the gateway's own figures of the same run.
 */
export async function measureJetStreamCeiling(options: CeilingOptions = {}): Promise<JetStreamCeiling> {
  const messageBytes = options.messageBytes ?? 512;
  const syncCount = options.syncCount ?? 3_000;
  const batchedCount = options.batchedCount ?? 30_000;
  const inFlight = options.inFlight ?? 256;
  const log = options.log ?? (() => {});
  const server = await startNatsServer({ binary: benchNatsBinary() });
  const nc = await connect({ servers: server.url });
  try {
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: "CEILING", subjects: ["ceiling.>"], storage: StorageType.File, retention: RetentionPolicy.Limits, num_replicas: 1 });
    const js = jetstream(nc);
    const payload = new Uint8Array(messageBytes).fill(0x61);

    log(`sync publish x${syncCount}`);
    let ms = await runConcurrently(syncCount, 1, async (i) => {
      await js.publish(`ceiling.sync.${i % 64}`, payload, { msgID: `s-${i}` });
    });
    const syncPublishPerSec = (syncCount / ms) * 1000;

    log(`batched publish x${batchedCount}, ${inFlight} in flight`);
    ms = await runConcurrently(batchedCount, inFlight, async (i) => {
      await js.publish(`ceiling.batch.${i % 64}`, payload, { msgID: `b-${i}` });
    });
    const batchedPublishPerSec = (batchedCount / ms) * 1000;

    log(`kv compare-and-set x${syncCount}`);
    const kv = await new Kvm(nc).create("ceiling_kv", { history: 1, storage: StorageType.File });
    let revision = await kv.create("k", payload);
    ms = await runConcurrently(syncCount, 1, async () => {
      revision = await kv.update("k", payload, revision);
    });
    const kvUpdatePerSec = (syncCount / ms) * 1000;

    const requestReplyPerSec = await requestReplyRate(nc, syncCount, 1, payload);
    const requestReply10PerSec = await requestReplyRate(nc, syncCount, 10, payload);

    log(`nats bench js pub sync x${syncCount}, then async x${batchedCount} (batch ${inFlight})`);
    const natsBenchSync = await natsBenchPublish(server.url, { mode: "sync", messages: syncCount, messageBytes, stream: "NATSBENCH" });
    const natsBenchAsync = await natsBenchPublish(server.url, { mode: "async", messages: batchedCount, messageBytes, batch: inFlight, stream: "NATSBENCH" });
    log("ceiling measured");
    return {
      serverVersion: nc.info?.version ?? "unknown",
      messageBytes,
      syncPublishPerSec,
      batchedPublishPerSec,
      batchedInFlight: inFlight,
      kvUpdatePerSec,
      requestReplyPerSec,
      requestReply10PerSec,
      natsBenchSync,
      natsBenchAsync,
    };
  } finally {
    await nc.close();
    await server.stop();
  }
}

async function requestReplyRate(nc: NatsConnection, count: number, concurrency: number, payload: Uint8Array): Promise<number> {
  // The responder has its own connection, as a gateway replica would.
  const responder = await connect({ servers: nc.getServer() });
  const sub = responder.subscribe("ceiling.echo", { callback: (_err, msg) => void msg.respond(msg.data) });
  await responder.flush();
  try {
    const ms = await runConcurrently(count, concurrency, async () => {
      await nc.request("ceiling.echo", payload, { timeout: 5_000 });
    });
    return (count / ms) * 1000;
  } finally {
    sub.unsubscribe();
    await responder.close();
  }
}
