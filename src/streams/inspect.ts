import type { JetStreamManager } from "@nats-io/jetstream";
import { type Definition } from "./definitions.js";
import { kvStreamName } from "./names.js";

/** The JetStream stream of every declared stream and bucket (consumers live inside those). */
export function declaredStreamNames(defs: readonly Definition[]): string[] {
  return defs.flatMap((d) => (d.kind === "stream" ? [d.name] : d.kind === "kv" ? [kvStreamName(d.bucket)] : []));
}

export interface StreamSnapshot {
  name: string;
  messages: number;
  bytes: number;
  consumers: number;
  replicas: number;
  /** Cluster leader and how many replicas are current; absent on a single server. */
  leader?: string;
  currentReplicas?: number;
  /** Set instead of the figures when the stream could not be read (missing, no quorum). */
  error?: string;
}

export interface ConsumerSnapshot {
  stream: string;
  name: string;
  /** Messages matching the filter not yet delivered to anyone. */
  pending: number;
  /** Delivered, not yet acknowledged (bounded by max_ack_pending). */
  ackPending: number;
  /** Delivered more than once and not yet acknowledged: work a client dropped or failed. */
  redelivered: number;
  /** Pull requests waiting for messages: roughly, idle workers. */
  waiting: number;
  maxAckPending: number;
}

export interface JetStreamSnapshot {
  streams: StreamSnapshot[];
  consumers: ConsumerSnapshot[];
}

/**
 * Reads the state of the given streams and their durable consumers, as `toolgate status` prints it and
 * `/metrics` exports it. A stream that cannot be read is reported with its error, not thrown.
 */
export async function inspectStreams(jsm: JetStreamManager, names: readonly string[]): Promise<JetStreamSnapshot> {
  const snapshot: JetStreamSnapshot = { streams: [], consumers: [] };
  for (const name of names) {
    try {
      const info = await jsm.streams.info(name);
      const peers = info.cluster?.replicas ?? [];
      snapshot.streams.push({
        name,
        messages: info.state.messages,
        bytes: info.state.bytes,
        consumers: info.state.consumer_count,
        replicas: info.config.num_replicas,
        ...(info.cluster?.leader ? { leader: info.cluster.leader, currentReplicas: 1 + peers.filter((p) => p.current).length } : {}),
      });
      for await (const c of jsm.consumers.list(name)) {
        // Ephemeral consumers (ordered reads of a bucket) come and go with random names: not state to watch.
        if (!c.config.durable_name) continue;
        snapshot.consumers.push({
          stream: name,
          name: c.name,
          pending: c.num_pending,
          ackPending: c.num_ack_pending,
          redelivered: c.num_redelivered,
          waiting: c.num_waiting,
          maxAckPending: c.config.max_ack_pending ?? -1,
        });
      }
    } catch (err) {
      snapshot.streams.push({ name, messages: 0, bytes: 0, consumers: 0, replicas: 0, error: (err as Error).message });
    }
  }
  return snapshot;
}
