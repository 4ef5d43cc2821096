import type { NatsConnection } from "@nats-io/transport-node";
import { Kvm, type KV } from "@nats-io/kv";

/** The KV buckets of the execution path (declared in `streams/kv.<bucket>.json`). */
export const EXECUTION_BUCKETS = {
  runs: "tg_runs",
  assignments: "tg_assignments",
  watch: "tg_watch",
  receiptIndex: "tg_receipt_index",
  progress: "tg_progress",
  projections: "tg_projections",
  presence: "tg_presence",
} as const;

export type ExecutionBuckets = { [K in keyof typeof EXECUTION_BUCKETS]: KV };

/** Binds to the buckets; they must exist (`toolgate streams apply`, or the gateway at start). */
export async function openExecutionBuckets(nc: NatsConnection): Promise<ExecutionBuckets> {
  const kvm = new Kvm(nc);
  const entries = await Promise.all(
    Object.entries(EXECUTION_BUCKETS).map(async ([role, bucket]) => [role, await kvm.open(bucket, { bindOnly: true })] as const),
  );
  return Object.fromEntries(entries) as ExecutionBuckets;
}
