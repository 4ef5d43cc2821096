import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js";
import type { ConfigStore } from "../config/config-store.js";
import type { Execution } from "../execution/execution.js";
import type { AssignmentRecord } from "../execution/model/records.js";
import type { AssignmentView } from "../execution/runs/views.js";
import { ToolgateError } from "../errors/toolgate-error.js";
import type { Logger } from "../log/logger.js";
import { Id } from "../wire/primitives.js";
import { callResult, toolError } from "./call-result.js";
import { ANSWERED, RunEventBuffer, settledView, type AnswerSources, type Opened } from "./settled-view.js";
import { mcpTool } from "./tool-listing.js";

/** The `_meta` key of a `tools/call` that names the tool call: it becomes its `tool_call_id` (the idempotency key). */
export const TOOL_CALL_ID_META = "io.toolgate/tool_call_id";

export interface SessionToolsDeps {
  store: ConfigStore;
  execution: Execution;
  log: Logger;
  version: string;
}

/** Where a session's tool calls are read and waited for. */
export function answerSources(deps: SessionToolsDeps): AnswerSources {
  return { history: deps.execution.history, events: deps.execution.events };
}

/** JSON-RPC error codes a session's tools answer with; each revision's server throws its SDK's error class with them. */
export const INVALID_REQUEST = -32600;
export const INVALID_PARAMS = -32602;
export const INTERNAL_ERROR = -32603;

/** A protocol error (not a tool error) of a session's tools, whatever the revision. */
export class McpFault extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

/** `tools/list`: the toolset version the session's agent version pins. */
export async function sessionTools(store: ConfigStore, sessionId: string): Promise<Tool[]> {
  const session = await store.getSession(sessionId);
  if (!session) throw new McpFault(INVALID_REQUEST, `session '${sessionId}' no longer exists`);
  const pinned = await store.getAgentVersion(session.agent_version);
  const toolset = pinned && (await store.getToolsetVersion(pinned.toolset, pinned.toolset_version));
  if (!toolset) throw new McpFault(INTERNAL_ERROR, `the toolset version pinned by agent version '${session.agent_version}' is missing`);
  return Promise.all(
    toolset.tools.map(async (tool) => {
      const binding = await store.getBinding(tool.binding_id);
      if (!binding) throw new McpFault(INTERNAL_ERROR, `binding '${tool.binding_id}' of tool '${tool.name}' is missing`);
      return mcpTool(tool, binding);
    }),
  );
}

/** A created tool call: its run and assignment. */
export interface ToolCallRef {
  run_id: string;
  assignment_id: string;
}

export interface ToolCallParams {
  name: string;
  arguments?: Record<string, unknown>;
  _meta?: Record<string, unknown>;
}

/**
 * Creates the tool call of a `tools/call` on the session's MCP run (made on first use) and answers
 * with its assignment as written (or as found, for a `tool_call_id` asked again), stored before
 * this returns. What the model can correct is a tool error (`answer`); an unknown tool is a
 * protocol error, as MCP asks. `waited` (a call whose answer or progress the request follows)
 * subscribes to the run's events before the call is made: the wait then starts from the state the
 * creation wrote, without reading it (`answerToolCall`).
 */
export async function createToolCall(
  execution: Execution,
  sessionId: string,
  runId: string,
  params: ToolCallParams,
  { waited = false } = {},
): Promise<{ call: ToolCallRef; assignment: AssignmentRecord; opened?: Opened } | { answer: CallToolResult }> {
  const key = params._meta?.[TOOL_CALL_ID_META];
  if (key !== undefined && !Id.safeParse(key).success)
    return { answer: toolError("invalid_tool_call_id", `_meta["${TOOL_CALL_ID_META}"] must be 1-128 characters of A-Z a-z 0-9 _ -`) };
  let events: RunEventBuffer | undefined;
  try {
    const run = await execution.runs.open(sessionId, runId);
    if (waited) events = new RunEventBuffer(execution.events, run.run_id);
    const created = await execution.toolCalls.create(run.run_id, {
      tool_name: params.name,
      arguments: params.arguments ?? {},
      ...(typeof key === "string" ? { tool_call_id: key } : {}),
    });
    const { assignment } = created;
    const call = { run_id: run.run_id, assignment_id: assignment.assignment_id };
    return events ? { call, assignment, opened: { events, ...(created.created ? { created: assignment.state } : {}) } } : { call, assignment };
  } catch (err) {
    events?.unsubscribe();
    if (err instanceof ToolgateError && err.code === "tool_not_found") throw new McpFault(INVALID_PARAMS, err.message);
    if (err instanceof ToolgateError && err.callerFault) return { answer: toolError(err.code, err.message, err.details) };
    throw err;
  }
}

/** Sends one progress entry as `notifications/progress` (its `progress` is the entry's sequence). */
export type ProgressSender = (notification: {
  method: "notifications/progress";
  params: { progressToken: string | number; progress: number; message: string };
}) => Promise<void>;

/** Forwards a call's progress entries to `send` when the client gave a progress token; a lost notification is not an error. */
export function progressForwarder(progressToken: unknown, send: ProgressSender): (entry: AssignmentView["progress"][number]) => void {
  if (typeof progressToken !== "string" && typeof progressToken !== "number") return () => undefined;
  return (entry) =>
    void send({ method: "notifications/progress", params: { progressToken, progress: entry.seq, message: JSON.stringify(entry.progress) } }).catch(
      () => undefined,
    );
}

/**
 * The answer of a call that waits: the stored projection once settled, or the submission once a
 * background task was submitted (a plain call never waits for a task's end, which may be days). `signal` aborting is either
 * a client disconnect (`isDisconnect()`: the call goes on, its result stays in history) or the
 * client's cancel of this request, which asks for the business-task cancel (never the run's).
 */
export async function answerToolCall(
  deps: SessionToolsDeps,
  { call, opened }: { call: ToolCallRef; opened?: Opened },
  signal: AbortSignal,
  isDisconnect: () => boolean,
  onProgress: (entry: AssignmentView["progress"][number]) => void,
): Promise<CallToolResult> {
  const { execution, log } = deps;
  // The connection closing aborts too, synchronously before it reports itself closed: look after it did.
  signal.addEventListener("abort", () => setImmediate(() => void (isDisconnect() ? undefined : cancelTask(execution, log, call.assignment_id))), {
    once: true,
  });
  const view = await settledView(answerSources(deps), call, signal, onProgress, { until: ANSWERED, opened });
  return view ? callResult(view) : toolError("cancel_requested", `the business-task cancel of assignment '${call.assignment_id}' was asked for`);
}

/** The business-task cancel of a call (the run goes on); work not yet running is left to finish. */
async function cancelTask(execution: Execution, log: Logger, assignmentId: string): Promise<void> {
  try {
    await execution.taskCancel.request(assignmentId, "the MCP client cancelled the tool call");
  } catch (err) {
    log.info({ assignment_id: assignmentId, err }, "MCP cancel: no business task to cancel");
  }
}
