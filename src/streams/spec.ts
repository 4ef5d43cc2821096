import type { ConsumerConfig, ConsumerInfo, StreamConfig, StreamInfo } from "@nats-io/jetstream";
import { millis, nanos } from "@nats-io/transport-node";
import type { ConsumerDefinition, Definition, KvDefinition, StreamDefinition } from "./definitions.js";
import { kvStreamName } from "./names.js";

/**
 * The comparable shape of one JetStream object: exactly the fields toolgate manages, in the units of
 * the definitions (ms, -1 = unlimited). Both a definition and the server's info are mapped to it, so a
 * diff is a plain field-by-field comparison.
 */
export type StreamSpec = {
  name: string;
  description: string;
  subjects: string[];
  retention: StreamDefinition["retention"];
  storage: StreamDefinition["storage"];
  discard: StreamDefinition["discard"];
  max_age_ms: number;
  max_bytes: number;
  max_msgs: number;
  max_msgs_per_subject: number;
  max_msg_size: number;
  duplicate_window_ms: number;
  allow_rollup: boolean;
  deny_delete: boolean;
  deny_purge: boolean;
  allow_direct: boolean;
  replicas: number;
};

export type ConsumerSpec = {
  stream: string;
  durable_name: string;
  description: string;
  filter_subject: string;
  /** Strings, not the definition's enums: the server may hold policies toolgate never declares. */
  ack_policy: string;
  deliver_policy: string;
  ack_wait_ms: number;
  max_deliver: number;
  max_ack_pending: number;
  max_waiting: number;
};

export type ObjectSpec = { kind: "stream"; spec: StreamSpec } | { kind: "consumer"; spec: ConsumerSpec };

/** The server's default de-duplication window: two minutes, or the max age when that is shorter. */
function defaultDuplicateWindow(maxAgeMs: number): number {
  return maxAgeMs > 0 ? Math.min(120_000, maxAgeMs) : 120_000;
}

function streamSpec(def: StreamDefinition, replicas: number): StreamSpec {
  return {
    name: def.name,
    description: def.description ?? "",
    subjects: def.subjects,
    retention: def.retention,
    storage: def.storage,
    discard: def.discard,
    max_age_ms: def.max_age_ms,
    max_bytes: def.max_bytes,
    max_msgs: def.max_msgs,
    max_msgs_per_subject: def.max_msgs_per_subject,
    max_msg_size: def.max_msg_size,
    duplicate_window_ms: def.duplicate_window_ms ?? defaultDuplicateWindow(def.max_age_ms),
    allow_rollup: def.allow_rollup,
    deny_delete: def.deny_delete,
    deny_purge: def.deny_purge,
    allow_direct: false,
    replicas,
  };
}

/** A KV bucket is a stream with the conventions the KV clients expect (the ones `Kvm.create` sets). */
function kvSpec(def: KvDefinition, replicas: number): StreamSpec {
  return {
    name: kvStreamName(def.bucket),
    description: def.description ?? "",
    subjects: [`$KV.${def.bucket}.>`],
    retention: "limits",
    storage: def.storage,
    discard: "new",
    max_age_ms: def.ttl_ms,
    max_bytes: def.max_bytes,
    max_msgs: -1,
    max_msgs_per_subject: def.history,
    max_msg_size: def.max_value_size,
    duplicate_window_ms: defaultDuplicateWindow(def.ttl_ms),
    allow_rollup: true,
    deny_delete: true,
    deny_purge: false,
    allow_direct: true,
    replicas,
  };
}

function consumerSpec(def: ConsumerDefinition): ConsumerSpec {
  return {
    stream: def.stream,
    durable_name: def.durable_name,
    description: def.description ?? "",
    filter_subject: def.filter_subject ?? "",
    ack_policy: def.ack_policy,
    deliver_policy: def.deliver_policy,
    ack_wait_ms: def.ack_wait_ms,
    max_deliver: def.max_deliver,
    max_ack_pending: def.max_ack_pending,
    max_waiting: def.max_waiting,
  };
}

export function desiredSpec(def: Definition, replicas: number): ObjectSpec {
  switch (def.kind) {
    case "stream":
      return { kind: "stream", spec: streamSpec(def, replicas) };
    case "kv":
      return { kind: "stream", spec: kvSpec(def, replicas) };
    case "consumer":
      return { kind: "consumer", spec: consumerSpec(def) };
  }
}

export function streamSpecFromInfo(info: StreamInfo): StreamSpec {
  const c = info.config;
  return {
    name: c.name,
    description: c.description ?? "",
    subjects: c.subjects ?? [],
    retention: c.retention,
    storage: c.storage,
    discard: c.discard ?? "old",
    max_age_ms: millis(c.max_age),
    max_bytes: c.max_bytes,
    max_msgs: c.max_msgs,
    max_msgs_per_subject: c.max_msgs_per_subject ?? -1,
    max_msg_size: c.max_msg_size ?? -1,
    duplicate_window_ms: millis(c.duplicate_window ?? 0),
    allow_rollup: c.allow_rollup_hdrs ?? false,
    deny_delete: c.deny_delete ?? false,
    deny_purge: c.deny_purge ?? false,
    allow_direct: c.allow_direct ?? false,
    replicas: c.num_replicas,
  };
}

export function consumerSpecFromInfo(info: ConsumerInfo): ConsumerSpec {
  const c = info.config;
  return {
    stream: info.stream_name,
    durable_name: c.durable_name ?? info.name,
    description: c.description ?? "",
    filter_subject: c.filter_subject ?? "",
    ack_policy: c.ack_policy,
    deliver_policy: c.deliver_policy,
    ack_wait_ms: millis(c.ack_wait ?? 0),
    max_deliver: c.max_deliver ?? -1,
    max_ack_pending: c.max_ack_pending ?? -1,
    max_waiting: c.max_waiting ?? 512,
  };
}

/** The JetStream API config for a stream spec (create, or the fields sent on update). */
export function streamConfig(spec: StreamSpec): Partial<StreamConfig> & { name: string } {
  return {
    name: spec.name,
    description: spec.description || undefined,
    subjects: spec.subjects,
    retention: spec.retention,
    storage: spec.storage,
    discard: spec.discard,
    max_age: nanos(spec.max_age_ms),
    max_bytes: spec.max_bytes,
    max_msgs: spec.max_msgs,
    max_msgs_per_subject: spec.max_msgs_per_subject,
    max_msg_size: spec.max_msg_size,
    duplicate_window: nanos(spec.duplicate_window_ms),
    allow_rollup_hdrs: spec.allow_rollup,
    deny_delete: spec.deny_delete,
    deny_purge: spec.deny_purge,
    allow_direct: spec.allow_direct,
    num_replicas: spec.replicas,
  } as Partial<StreamConfig> & { name: string };
}

export function consumerConfig(spec: ConsumerSpec): Partial<ConsumerConfig> {
  return {
    durable_name: spec.durable_name,
    description: spec.description || undefined,
    filter_subject: spec.filter_subject || undefined,
    ack_policy: spec.ack_policy,
    deliver_policy: spec.deliver_policy,
    ack_wait: nanos(spec.ack_wait_ms),
    max_deliver: spec.max_deliver,
    max_ack_pending: spec.max_ack_pending,
    max_waiting: spec.max_waiting,
  } as Partial<ConsumerConfig>;
}
