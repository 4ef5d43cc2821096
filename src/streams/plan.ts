import { JetStreamApiCodes, JetStreamApiError, type JetStreamManager } from "@nats-io/jetstream";
import { definitionLabel, type Definition } from "./definitions.js";
import { consumerSpecFromInfo, desiredSpec, streamSpecFromInfo, type ConsumerSpec, type ObjectSpec, type StreamSpec } from "./spec.js";

/**
 * How a changed field can be brought to its declared value:
 * - `update`: an in-place update that loses nothing;
 * - `destructive`: an in-place update that may discard data (a shrunk limit); needs `force`;
 * - `recreate`: the server cannot change it; delete and re-create the object, losing its data or
 *   position; needs `force`.
 */
export type ChangeEffect = "update" | "destructive" | "recreate";

export interface FieldChange {
  field: string;
  from: unknown;
  to: unknown;
  effect: ChangeEffect;
}

export interface PlanEntry {
  label: string;
  desired: ObjectSpec;
  action: "create" | "update" | "recreate" | "unchanged";
  changes: FieldChange[];
  /** True when applying this entry may lose data, so it needs `force`. */
  destructive: boolean;
}

type Rule = (from: never, to: never) => ChangeEffect;

const update: Rule = () => "update";
const recreate: Rule = () => "recreate";
/** A limit where -1 (and 0 for ages) means unlimited: lowering it may drop stored messages. */
const limit: Rule = (from: number, to: number) => (bound(to) < bound(from) ? "destructive" : "update");
/** The server accepts turning deny_delete/deny_purge on, but never off again. */
const onlyOn: Rule = (from: boolean, to: boolean) => (from && !to ? "recreate" : "update");

function bound(n: number): number {
  return n <= 0 ? Number.POSITIVE_INFINITY : n;
}

const streamRules: { [K in keyof StreamSpec]: Rule } = {
  name: recreate,
  description: update,
  subjects: update,
  retention: recreate,
  storage: recreate,
  discard: update,
  max_age_ms: limit,
  max_bytes: limit,
  max_msgs: limit,
  max_msgs_per_subject: limit,
  max_msg_size: update, // only refuses new oversized messages; stored ones stay
  duplicate_window_ms: update,
  allow_rollup: update,
  deny_delete: onlyOn,
  deny_purge: onlyOn,
  allow_direct: update,
  replicas: update,
};

// nats-server 2.9 refuses to update a consumer's policies, filter and pull waiting limit.
const consumerRules: { [K in keyof ConsumerSpec]: Rule } = {
  stream: recreate,
  durable_name: recreate,
  description: update,
  filter_subject: recreate,
  ack_policy: recreate,
  deliver_policy: recreate,
  ack_wait_ms: update,
  max_deliver: update,
  max_ack_pending: update,
  max_waiting: recreate,
};

function diff<T extends Record<string, unknown>>(current: T, desired: T, rules: { [K in keyof T]: Rule }): FieldChange[] {
  const changes: FieldChange[] = [];
  for (const field of Object.keys(rules) as (keyof T & string)[]) {
    const from = current[field];
    const to = desired[field];
    if (JSON.stringify(from) === JSON.stringify(to)) continue;
    changes.push({ field, from, to, effect: (rules[field] as (a: unknown, b: unknown) => ChangeEffect)(from, to) });
  }
  return changes;
}

async function notFoundAsNull<T>(read: Promise<T>): Promise<T | null> {
  try {
    return await read;
  } catch (err) {
    const missing = err instanceof JetStreamApiError && (err.code === JetStreamApiCodes.StreamNotFound || err.code === JetStreamApiCodes.ConsumerNotFound);
    if (missing) return null;
    throw err;
  }
}

async function currentChanges(jsm: JetStreamManager, desired: ObjectSpec): Promise<FieldChange[] | null> {
  if (desired.kind === "stream") {
    const info = await notFoundAsNull(jsm.streams.info(desired.spec.name));
    return info && diff(streamSpecFromInfo(info), desired.spec, streamRules);
  }
  const info = await notFoundAsNull(jsm.consumers.info(desired.spec.stream, desired.spec.durable_name));
  return info && diff(consumerSpecFromInfo(info), desired.spec, consumerRules);
}

/** Compares every definition with the server; reads only, changes nothing. */
export async function planStreams(jsm: JetStreamManager, defs: Definition[], options: { replicas: number }): Promise<PlanEntry[]> {
  const plan: PlanEntry[] = [];
  for (const def of defs) {
    const desired = desiredSpec(def, options.replicas);
    const changes = await currentChanges(jsm, desired);
    const label = definitionLabel(def);
    if (changes === null) {
      plan.push({ label, desired, action: "create", changes: [], destructive: false });
      continue;
    }
    const needsRecreate = changes.some((c) => c.effect === "recreate");
    plan.push({
      label,
      desired,
      action: changes.length === 0 ? "unchanged" : needsRecreate ? "recreate" : "update",
      changes,
      destructive: changes.some((c) => c.effect !== "update"),
    });
  }
  return plan;
}
