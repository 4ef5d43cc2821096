import type { Executor } from "../executors/schemas.js";
import type { Receipt } from "../wire/messages.js";
import type { AssignmentRecord, ProgressEntry, ProjectionRecord, ReceiptIndexEntry, RunRecord } from "../execution/model/records.js";

/**
 * Everything the history checker reads, as plain data: what the gateway stored in JetStream and what
 * the executors recorded on their side. `readHistory` (NATS) and `readEvidence` (SQLite files) fill
 * it; unit tests craft it by hand.
 */
export interface StoredHistory {
  runs: Array<Stamped<RunRecord>>;
  assignments: Array<Stamped<AssignmentRecord>>;
  /** Every receipt of `TG_RECEIPTS`, in stream order (a chain's message gives one per receipt); `receipt` is null for a message that is no receipt. */
  receipts: StoredReceipt[];
  index: ReceiptIndexEntry[];
  progress: ProgressEntry[];
  projections: ProjectionRecord[];
  /** Sequence bookkeeping of the create-only buckets (receipt index, progress, projections). */
  createOnly: CreateOnlyBucket[];
  /** The executor registry's kept history; absent when it could not be read (the rule needing it is skipped). */
  registry?: RegistryHistory;
}

/** Every revision the executor registry (`tg_executors`) keeps, in stream order; `value` null for a removal. */
export interface RegistryHistory {
  /** Revisions the bucket keeps per executor: a key with this many may have lost older ones. */
  keep: number;
  revisions: Array<{ executor_id: string; storedAt: number; value: Executor | null }>;
}

/** A KV value with the server's timestamp of its latest revision (ms), the clock every check compares against. */
export interface Stamped<T> {
  value: T;
  revision: number;
  storedAt: number;
}

export interface StoredReceipt {
  seq: number;
  /** Server timestamp of the publish (ms). */
  storedAt: number;
  receipt: Receipt | null;
}

/**
 * A create-only bucket keeps one message per key forever, so its stream holds exactly the
 * sequences 1..last. A missing sequence is a key written twice (history 1 drops the first) or deleted.
 */
export interface CreateOnlyBucket {
  bucket: string;
  firstSeq: number;
  lastSeq: number;
  messages: number;
}

/** What the executors say happened, from their own durable records. */
export interface ExecutorEvidence {
  /** Executors whose side-effect ledger was supplied (a completed write of another executor is not expected in it). */
  ledgerExecutors: string[];
  sideEffects: SideEffect[];
  /** Executors whose outbox (runner store) was supplied. */
  outboxExecutors: string[];
  outbox: OutboxEntry[];
}

/** One row of a write tool's side-effect ledger: the business operation really happened once. */
export interface SideEffect {
  executor_id: string;
  assignment_id: string;
  generation: number;
  operation_key: string;
}

/** One receipt of an executor's outbox with the answer it took as definitive (null: never answered). */
export interface OutboxEntry {
  executor_id: string;
  receipt_id: string;
  assignment_id: string;
  kind: string;
  answer_status: string | null;
  answer_code: string | null;
}

export const NO_EVIDENCE: ExecutorEvidence = { ledgerExecutors: [], sideEffects: [], outboxExecutors: [], outbox: [] };
