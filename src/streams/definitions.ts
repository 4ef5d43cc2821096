import { z } from "zod";

/**
 * The declarative format of `streams/`: one JSON file per JetStream object, discriminated by `kind`.
 * Durations are milliseconds, limits use -1 for "unlimited" (as the server does). Replica counts are
 * deliberately absent: they come from the deployment (`--replicas`, TOOLGATE_STREAM_REPLICAS).
 */

/** Stream, bucket and consumer names: what JetStream accepts in an API subject token. */
const objectName = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, "use 1-64 of A-Z a-z 0-9 _ - (no dots, spaces or wildcards)");
const subject = z.string().regex(/^[^\s]+$/, "a NATS subject has no whitespace");
const limit = z.number().int().min(-1);
const ms = z.number().int().min(0);

export const StreamDefinitionSchema = z.strictObject({
  kind: z.literal("stream"),
  name: objectName,
  description: z.string().optional(),
  subjects: z.array(subject).min(1),
  retention: z.enum(["limits", "workqueue", "interest"]).default("limits"),
  storage: z.enum(["file", "memory"]).default("file"),
  discard: z.enum(["old", "new"]).default("old"),
  max_age_ms: ms.default(0),
  max_bytes: limit.default(-1),
  max_msgs: limit.default(-1),
  max_msgs_per_subject: limit.default(-1),
  max_msg_size: limit.default(-1),
  /** Server-side de-duplication window for `Nats-Msg-Id`; the server's own default when omitted. */
  duplicate_window_ms: ms.optional(),
  allow_rollup: z.boolean().default(false),
  deny_delete: z.boolean().default(false),
  deny_purge: z.boolean().default(false),
});

export const KvDefinitionSchema = z.strictObject({
  kind: z.literal("kv"),
  bucket: objectName,
  description: z.string().optional(),
  history: z.number().int().min(1).max(64).default(1),
  ttl_ms: ms.default(0),
  storage: z.enum(["file", "memory"]).default("file"),
  max_bytes: limit.default(-1),
  max_value_size: limit.default(-1),
});

export const ConsumerDefinitionSchema = z.strictObject({
  kind: z.literal("consumer"),
  stream: objectName,
  /** Durable pull consumer; shared by every process that binds to it. */
  durable_name: objectName,
  description: z.string().optional(),
  filter_subject: subject.optional(),
  ack_policy: z.enum(["explicit", "none", "all"]).default("explicit"),
  deliver_policy: z.enum(["all", "new", "last", "last_per_subject"]).default("all"),
  ack_wait_ms: ms.default(30_000),
  max_deliver: limit.default(-1),
  max_ack_pending: limit.default(1000),
  max_waiting: z.number().int().min(1).default(512),
});

export const DefinitionSchema = z.discriminatedUnion("kind", [StreamDefinitionSchema, KvDefinitionSchema, ConsumerDefinitionSchema]);

export type StreamDefinition = z.infer<typeof StreamDefinitionSchema>;
export type KvDefinition = z.infer<typeof KvDefinitionSchema>;
export type ConsumerDefinition = z.infer<typeof ConsumerDefinitionSchema>;
export type Definition = z.infer<typeof DefinitionSchema>;

/** A human label such as `stream TG_CANDIDATES`, `kv tg_config`, `consumer TG_CANDIDATES/scope-a`. */
export function definitionLabel(def: Definition): string {
  switch (def.kind) {
    case "stream":
      return `stream ${def.name}`;
    case "kv":
      return `kv ${def.bucket}`;
    case "consumer":
      return `consumer ${def.stream}/${def.durable_name}`;
  }
}

/** Replica count of every stream and bucket (JetStream allows 1 to 5; R1 on one server, R3 on a cluster). */
export const ReplicasSchema = z.coerce.number().int().min(1).max(5);
