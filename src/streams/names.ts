/**
 * The name of every JetStream stream, KV bucket and durable consumer toolgate uses, in one place
 * (each is declared, with its limits, in `streams/`). No imports: the ToolRunner, the gateway and
 * the tools all read their names from here.
 */

/** The streams of the executor protocol. */
export const STREAMS = { candidates: "TG_CANDIDATES", receipts: "TG_RECEIPTS", control: "TG_CONTROL", events: "TG_EVENTS" } as const;

/** The KV buckets of the execution path. */
export const EXECUTION_BUCKETS = {
  runs: "tg_runs",
  assignments: "tg_assignments",
  watch: "tg_watch",
  receiptIndex: "tg_receipt_index",
  progress: "tg_progress",
  projections: "tg_projections",
  presence: "tg_presence",
  claims: "tg_claims",
} as const;

/**
 * The prefix of the lease sweeper's watch keys in the assignments bucket (store layout 6): an
 * assignment's key is its id, which has no dot, so no assignment is read as a watch, nor a watch as
 * an assignment.
 */
export const ASSIGNMENT_BUCKET_WATCH_PREFIX = "w.";

/** The configuration plane's bucket (bindings, toolsets, agent versions, sessions). */
export const CONFIG_BUCKET = "tg_config";

/** The executor registry's bucket. */
export const EXECUTORS_BUCKET = "tg_executors";

/** The context window's buckets. */
export const CONTEXT_BUCKETS = { runs: "tg_run_context", ratios: "tg_token_ratios" } as const;

/** JetStream keeps a KV bucket in the stream `KV_<bucket>`. */
export function kvStreamName(bucket: string): string {
  return `KV_${bucket}`;
}

/**
 * Name of the one durable pull consumer of a scope on `TG_CANDIDATES` (filter `candidateFilter(scope)`),
 * shared by all executors of that scope. The gateway creates it when a binding of the scope is registered.
 */
export const candidateConsumer = (scope: string): string => `cand-${scope}`;

/** The durable receipt consumer every gateway replica shares (`streams/consumer.TG_RECEIPTS.gateway.json`). */
export const RECEIPT_CONSUMER = "gateway";

/** The durable consumer of product requests every gateway replica shares (`streams/consumer.TG_CONTROL.gateway-requests.json`). */
export const CONTROL_REQUEST_CONSUMER = "gateway-requests";
