import type { Logger } from "../../../src/log/logger.js";
import { ToolRunner, type RunnerStore, type ToolContext } from "../../../src/runner/index.js";
import type { TestGateway } from "../../helpers/execution-gateway.js";

/** Runner timings short enough for a test to see resends and answers quickly. */
export const FAST_RUNNER_TIMING = {
  answerTimeoutMs: 500,
  maxResendIntervalMs: 1_000,
  requestTimeoutMs: 1_000,
  pullExpiresMs: 1_000,
  releaseDelayMs: 100,
} as const;

/**
 * Registers the two bindings and, given its id, the executor serving them (`POST /v1/executors`, the
 * registry that grants its claims; the crash fixture registers itself), publishes a toolset with `tasks.read` and `tasks.create`, an agent version, and
 * opens a session.
 */
export async function publishTasksAgent(
  gw: TestGateway,
  ids: { scope: string; readBinding: string; writeBinding: string; agent: string; executorId?: string },
): Promise<{ sessionId: string; agentVersion: string }> {
  await gw.api("POST", "/v1/bindings", { binding_id: ids.readBinding, executor_scope: ids.scope, tool_kind: "read" });
  await gw.api("POST", "/v1/bindings", { binding_id: ids.writeBinding, executor_scope: ids.scope, tool_kind: "write" });
  if (ids.executorId) await gw.api("POST", "/v1/executors", { executor_id: ids.executorId, scope: ids.scope, bindings: [ids.readBinding, ids.writeBinding] });
  const toolset = `${ids.agent}-tools`;
  await gw.api("POST", `/v1/toolsets/${toolset}/versions`, {
    version: "v1",
    tools: [
      {
        name: "tasks.read",
        description: "Read tasks, a page at a time",
        binding_id: ids.readBinding,
        input_schema: { type: "object", properties: { cursor: { type: "string" } } },
        output_schema: { type: "object" },
        max_result_context_bytes: 1024,
      },
      {
        name: "tasks.create",
        description: "Create a task",
        binding_id: ids.writeBinding,
        input_schema: { type: "object", properties: { title: { type: "string" } }, required: ["title"] },
        output_schema: { type: "object" },
      },
    ],
  });
  const agentVersion = await gw.api("POST", `/v1/agents/${ids.agent}/versions`, { toolset, toolset_version: "v1", max_context_tokens: 100_000 });
  const session = await gw.api("POST", "/v1/sessions", { agent_version: agentVersion.agent_version, subject: "user-42" });
  return { sessionId: session.session_id, agentVersion: agentVersion.agent_version };
}

/** `publishTasksAgent`'s ids for one scope and its executor: bindings and agent named after the scope. */
export function scopedTasksAgent(scope: string, executorId: string): Parameters<typeof publishTasksAgent>[1] {
  return { scope, readBinding: `${scope}-read`, writeBinding: `${scope}-write`, agent: `${scope}-agent`, executorId };
}

/** A ToolRunner serving `tasks.read` of `publishTasksAgent`'s read binding with `handler`, on FAST_RUNNER_TIMING. */
export function startTasksReadRunner(options: {
  natsUrl: string;
  scope: string;
  executorId: string;
  store: RunnerStore;
  logger: Logger;
  handler: (ctx: ToolContext<{ cursor?: string }>) => Promise<unknown>;
  /** How long a read's `accepted` waits for its outcome (the runner's default otherwise). */
  acceptedLingerMs?: number;
}): Promise<ToolRunner> {
  const { natsUrl, scope, executorId, store, logger, handler, acceptedLingerMs } = options;
  return ToolRunner.start({
    natsUrl,
    executorId,
    scope,
    store,
    logger,
    authorize: () => true,
    ...FAST_RUNNER_TIMING,
    ...(acceptedLingerMs === undefined ? {} : { acceptedLingerMs }),
    tools: { "tasks.read": { kind: "read", bindingId: `${scope}-read`, handler } },
  });
}
