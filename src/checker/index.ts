export { checkHistory, projectionDigest, RULES, type CheckOptions, type CheckReport, type ProjectionSnapshot, type Rule, type Violation } from "./check.js";
export { readEvidence, SideEffectLedger } from "./evidence.js";
export {
  NO_EVIDENCE,
  type CreateOnlyBucket,
  type ExecutorEvidence,
  type OutboxEntry,
  type SideEffect,
  type Stamped,
  type StoredHistory,
  type StoredReceipt,
} from "./history.js";
export { readHistory, type ReadOptions } from "./read-nats.js";
export { formatReport, snapshotOf } from "./report.js";
