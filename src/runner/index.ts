/**
 * `toolgate/runner`: the executor SDK a product embeds to run its tools behind toolgate.
 * See docs/runner.md.
 */
export { ToolRunner, type ToolRunnerOptions } from "./runner.js";
export { executorInboxPrefix } from "../wire/subjects.js";
export { natsClientEnv, type NatsClientEnv } from "../nats/client-options.js";
export { localNatsUrl } from "../nats/local-nats.js";
export { BusinessCancelled, BusinessFailure } from "./outcome.js";
export {
  CancelRequested,
  type Authorize,
  type AuthorizeDecision,
  type AuthorizeRequest,
  type CompensationContext,
  type ReconcileOutcome,
  type Submission,
  SubmissionRefused,
  type SubmittedTaskInfo,
  type TaskStopRequest,
  type ToolContext,
  type ToolDefinition,
  type ToolGrant,
} from "./tools.js";
export { RunnerTasks, UnknownTaskError } from "./tasks.js";
export { SqliteRunnerStore } from "./sqlite-store.js";
export {
  PhaseConflictError,
  type AssignmentKey,
  type LocalAssignment,
  type OutboxReceipt,
  type PhaseChange,
  type ReceiptBody,
  type RunnerStore,
  type StoredAnswer,
} from "./store.js";
export { PHASES, type Phase } from "./phases.js";
export { runnerLogger, type Logger } from "./logger.js";
export { dryRun, type DryRunRequest, type DryRunResponse, type DryRunSample } from "./dry-run.js";
export { GatewayError, type GatewayErrorCode } from "../client/errors.js";
