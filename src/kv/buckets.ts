import type { NatsConnection } from "@nats-io/transport-node";
import { jetstream, jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import { Kvm, type KV } from "@nats-io/kv";
import type { z } from "zod";
import { EXECUTION_BUCKETS, kvStreamName } from "../streams/names.js";
import { VersionedStore } from "./versioned-store.js";

export type BucketRole = keyof typeof EXECUTION_BUCKETS;

/**
 * Opens stores of any declared buckets by name on one connection; the buckets must exist.
 *
 * Reads are direct gets (`$JS.API.DIRECT.GET`: the raw message, no JSON envelope, no base64, no
 * API advisory; about a third of nats-server's work per tool call went into the other kind) when
 * the bucket allows them and has one replica. On a replicated bucket any replica answers a direct
 * get, a follower possibly with an older value, so reads there go through the stream leader: a
 * decision not to write must never rest on a stale copy.
 */
export async function bucketStores(nc: NatsConnection): Promise<<T>(bucket: string, schema: z.ZodType<T>) => Promise<VersionedStore<T>>> {
  const kvm = new Kvm(nc);
  const js = jetstream(nc);
  const jsm = await jetstreamManager(nc);
  return async (bucket, schema) => new VersionedStore(await openBucket(kvm, jsm, bucket), schema, { bucket, nc, js, jsm });
}

/** Binds an existing bucket, its reads direct gets where that is safe (above). */
export async function openBucket(kvm: Kvm, jsm: JetStreamManager, bucket: string): Promise<KV> {
  const { config } = await jsm.streams.info(kvStreamName(bucket));
  return kvm.open(bucket, { bindOnly: true, allow_direct: config.allow_direct === true && config.num_replicas === 1 });
}

/** Opens the execution path's bucket stores on one connection (`toolgate streams apply`, or the gateway at start, makes them). */
export async function executionStores(nc: NatsConnection): Promise<<T>(role: BucketRole, schema: z.ZodType<T>) => Promise<VersionedStore<T>>> {
  const open = await bucketStores(nc);
  return (role, schema) => open(EXECUTION_BUCKETS[role], schema);
}
