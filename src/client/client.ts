import type { AssignmentState } from "../execution/model/assignment-states.js";
import { TERMINAL_ASSIGNMENT_STATES } from "../execution/model/assignment-states.js";
import { ModelTools } from "./model-tools.js";
import { parseEventStream, toRunEvent, type RunEventWithId } from "./event-source.js";
import { operations, type OperationId, type RequestBody, type ResponseBody } from "./operations.js";
import { GatewayError } from "./errors.js";
import { DEFAULT_RETRY, backoffMs, callSignal, sendWithRetry, sleep, type CallOptions, type RetryPolicy } from "./transport.js";

export interface ToolgateClientOptions {
  /** The gateway's API, e.g. `http://127.0.0.1:8080`. */
  baseUrl: string;
  /** An identity's API key (docs/configuration.md); sent as `Authorization: Bearer`. */
  apiKey: string;
  /** Retrying of 429 and 503 answers; the defaults are {@link DEFAULT_RETRY}. */
  retry?: Partial<RetryPolicy>;
  /**
   * An event stream silent this long (not even the gateway's heartbeat comment, every 15 s by
   * default) is taken for a dead connection and resumed. Default 45 000 ms.
   */
  eventIdleMs?: number;
}

const DEFAULT_EVENT_IDLE_MS = 45_000;

export type Assignment = ResponseBody<"getAssignment">;
export type Run = ResponseBody<"getRun">;
/** A background task's outcome, an entry of the run's history of its own (docs/async-tasks.md). */
export type TaskResult = ResponseBody<"getRunHistory">["task_results"][number];
/** A tool call as the agent sends it; `tool_call_id` (the model's id of the call) makes a repeated call return the same assignment. */
export type ToolCallRequest = RequestBody<"createToolCall"> & { tool_call_id: string };

/** A failure the event stream resumes after: no connection or a cut one (fetch's TypeError), or a gateway not ready yet. */
const isDroppedConnection = (err: unknown) => err instanceof TypeError || (err instanceof GatewayError && err.status === 503);

/** One event stream connection, aborted when nothing arrived on it for `idleMs` (a dead peer sends no FIN). */
class IdleConnection {
  readonly #controller = new AbortController();
  readonly #idleMs: number;
  #timer: NodeJS.Timeout;
  idle = false;
  readonly signal: AbortSignal;

  constructor(idleMs: number, outer: AbortSignal | undefined) {
    this.#idleMs = idleMs;
    this.signal = outer ? AbortSignal.any([outer, this.#controller.signal]) : this.#controller.signal;
    this.#timer = this.#arm();
  }

  #arm(): NodeJS.Timeout {
    return setTimeout(() => {
      this.idle = true;
      this.#controller.abort(new Error(`no event or heartbeat for ${this.#idleMs} ms`));
    }, this.#idleMs);
  }

  /** The body, each chunk of which (events and heartbeat comments alike) restarts the idle clock. */
  watch(body: ReadableStream<Uint8Array>): ReadableStream<Uint8Array> {
    return body.pipeThrough(
      new TransformStream({
        transform: (chunk, out) => {
          clearTimeout(this.#timer);
          this.#timer = this.#arm();
          out.enqueue(chunk);
        },
      }),
    );
  }

  /** Ends the connection (a reader that stopped early leaves nothing open on the gateway). */
  close(): void {
    clearTimeout(this.#timer);
    this.#controller.abort();
  }
}

/** The states after which an assignment's answer to the model no longer changes by itself (reconciliation waits for an operator). */
const SETTLED: ReadonlySet<AssignmentState> = new Set([...TERMINAL_ASSIGNMENT_STATES, "reconciliation_required"]);
/** A tool call has its answer once settled, or once it submitted a background task (the submission is its answer). */
const ANSWERED: ReadonlySet<AssignmentState> = new Set([...SETTLED, "submitted"]);

/** Options of a read of a run's events: `after`, an event id (0: from the run's start). */
type EventOptions = CallOptions & { after?: number };

/** Runs whose newest seen event a client keeps (an agent loop works on a few at a time). */
const RUNS_FOLLOWED = 1_000;

/**
 * The agent-side SDK over toolgate's HTTP API: configuration (bindings, toolset and agent versions,
 * sessions), runs and tool calls, the run's event stream, history, the section-4 operations, the
 * context window and the dry-run. Every method takes an optional `signal` and `timeoutMs`; a refusal
 * throws `GatewayError` with the gateway's catalogue code.
 */
export class ToolgateClient {
  readonly #baseUrl: string;
  readonly #apiKey: string;
  readonly #retry: RetryPolicy;
  readonly #eventIdleMs: number;
  /**
   * Per run, the newest event id this client has read. Every event of a call created afterwards
   * comes later, so its wait starts there instead of reading the run's events from the start again
   * (a loop of n calls would read ~5n²/2 events, and make the server deliver them).
   */
  readonly #newestEvent = new Map<string, number>();

  constructor(options: ToolgateClientOptions) {
    this.#baseUrl = options.baseUrl;
    this.#apiKey = options.apiKey;
    this.#retry = { ...DEFAULT_RETRY, ...options.retry };
    this.#eventIdleMs = options.eventIdleMs ?? DEFAULT_EVENT_IDLE_MS;
  }

  createBinding(binding: RequestBody<"createBinding">, options?: CallOptions) {
    return this.#call("createBinding", {}, binding, options);
  }
  listBindings(options?: CallOptions) {
    return this.#call("listBindings", {}, undefined, options);
  }
  getBinding(bindingId: string, options?: CallOptions) {
    return this.#call("getBinding", { binding_id: bindingId }, undefined, options);
  }
  publishToolsetVersion(toolset: string, version: RequestBody<"publishToolsetVersion">, options?: CallOptions) {
    return this.#call("publishToolsetVersion", { toolset }, version, options);
  }
  getToolsetVersion(toolset: string, version: string, options?: CallOptions) {
    return this.#call("getToolsetVersion", { toolset, version }, undefined, options);
  }
  listToolsetVersions(toolset: string, options?: CallOptions) {
    return this.#call("listToolsetVersions", { toolset }, undefined, options);
  }
  publishAgentVersion(agent: string, version: RequestBody<"publishAgentVersion">, options?: CallOptions) {
    return this.#call("publishAgentVersion", { agent }, version, options);
  }
  getAgentVersion(agentVersion: string, options?: CallOptions) {
    return this.#call("getAgentVersion", { agent_version: agentVersion }, undefined, options);
  }
  listAgentVersions(agent: string, options?: CallOptions) {
    return this.#call("listAgentVersions", { agent }, undefined, options);
  }
  /** The tools an agent version pins (its toolset version's), ready to offer to a model. */
  async agentTools(agentVersion: string, options?: CallOptions): Promise<ModelTools> {
    const pinned = await this.getAgentVersion(agentVersion, options);
    return new ModelTools((await this.getToolsetVersion(pinned.toolset, pinned.toolset_version, options)).tools);
  }
  createSession(session: RequestBody<"createSession">, options?: CallOptions) {
    return this.#call("createSession", {}, session, options);
  }
  getSession(sessionId: string, options?: CallOptions) {
    return this.#call("getSession", { session_id: sessionId }, undefined, options);
  }
  /** The agent's sessions. */
  listSessions(agent: string, options?: CallOptions) {
    return this.#call("listSessions", {}, undefined, { ...options, query: { agent } });
  }
  createRun(sessionId: string, options?: CallOptions) {
    return this.#call("createRun", { session_id: sessionId }, undefined, options);
  }
  getRun(runId: string, options?: CallOptions) {
    return this.#call("getRun", { run_id: runId }, undefined, options);
  }
  completeRun(runId: string, options?: CallOptions) {
    return this.#call("completeRun", { run_id: runId }, undefined, options);
  }
  cancelRun(runId: string, options?: CallOptions) {
    return this.#call("cancelRun", { run_id: runId }, undefined, options);
  }

  /** Creates the tool call (or finds it again by its `tool_call_id`); `result()` waits for its answer. */
  async callTool(runId: string, call: ToolCallRequest, options?: CallOptions): Promise<ToolCall> {
    // Taken before the request: the call's events all come after it. A call made before (its
    // tool_call_id again) may have had them earlier: its wait reads the run's events from the start.
    const before = this.#newestEvent.get(runId) ?? 0;
    const { created, assignment } = await this.#call("createToolCall", { run_id: runId }, call, options);
    return new ToolCall(this, created, assignment, created ? before : 0);
  }
  getAssignment(assignmentId: string, options?: CallOptions) {
    return this.#call("getAssignment", { assignment_id: assignmentId }, undefined, options);
  }
  /** What the model sees: each tool call of the run with its stored projection. */
  history(runId: string, options?: CallOptions) {
    return this.#call("getRunHistory", { run_id: runId }, undefined, options);
  }
  /** The run's background tasks: state, task reference and status, progress, results in history. */
  tasks(runId: string, options?: CallOptions) {
    return this.#call("getRunTasks", { run_id: runId }, undefined, options);
  }

  /** Ask the executor to stop a running business task (not the run). */
  cancelTask(assignmentId: string, reason?: string, options?: CallOptions) {
    return this.#call("cancelTask", { assignment_id: assignmentId }, reason === undefined ? {} : { reason }, options);
  }
  /** Undo a completed write by a compensation assignment. */
  compensate(assignmentId: string, options?: CallOptions) {
    return this.#call("compensate", { assignment_id: assignmentId }, undefined, options);
  }
  /** Settle a reconciliation_required assignment as an operator. */
  reconcile(assignmentId: string, settlement: RequestBody<"reconcileAssignment">, options?: CallOptions) {
    return this.#call("reconcileAssignment", { assignment_id: assignmentId }, settlement, options);
  }
  /** Detach an executor: its claims return to the candidates; the runs go on. */
  detachExecutor(executorId: string, scope: string, options?: CallOptions) {
    return this.#call("detachExecutor", { executor_id: executorId }, { scope }, options);
  }

  /** Report a model call's billed input tokens; answers the context window. */
  reportUsage(runId: string, usage: RequestBody<"reportUsage">, options?: CallOptions) {
    return this.#call("reportUsage", { run_id: runId }, usage, options);
  }
  /** The run's context size and whether the next model request must be compacted (`must_compact`). */
  contextWindow(runId: string, options?: CallOptions) {
    return this.#call("getRunContext", { run_id: runId }, undefined, options);
  }
  /** What the model would see of result samples; executes nothing. */
  dryRun(request: RequestBody<"dryRunTool">, options?: CallOptions) {
    return this.#call("dryRunTool", {}, request, options);
  }

  /**
   * The run's events, from after `after` (0: from the start). A dropped connection (the network, the
   * gateway restarting or answering 503 while it starts, or a connection silent for `eventIdleMs`) is
   * resumed with `Last-Event-ID` after a backoff (doubling from `retry.initialDelayMs` up to
   * `retry.maxDelayMs`, reset by each event), so no event is missed or repeated; the stream ends only
   * by the signal or an error answer.
   */
  async *runEvents(runId: string, options: EventOptions = {}): AsyncGenerator<RunEventWithId> {
    const signal = callSignal(options);
    let last = options.after ?? 0;
    // Events read of a message whose last event (the one with its id) has not come yet: after a drop
    // the stream resumes at that message's start, so they come again first and are skipped.
    let readOfMessage = 0;
    for (let drops = 0; ; drops++) {
      let again = readOfMessage;
      const connection = new IdleConnection(this.#eventIdleMs, signal);
      try {
        const response = await sendWithRetry(
          () =>
            fetch(this.#url("getRunEvents", { run_id: runId }), {
              headers: { ...this.#headers(), accept: "text/event-stream", "last-event-id": String(last) },
              signal: connection.signal,
            }),
          "getRunEvents",
          this.#retry,
          signal,
        );
        for await (const raw of parseEventStream(connection.watch(response.body!))) {
          if (again > 0 && raw.id === undefined) {
            again--;
            continue;
          }
          again = 0;
          const event = toRunEvent(raw, last);
          if (raw.id === undefined) readOfMessage++;
          else [last, readOfMessage] = [event.id, 0];
          drops = 0;
          this.#sawEvent(runId, event.id);
          yield event;
        }
      } catch (err) {
        if (signal?.aborted) throw signal.reason;
        if (!connection.idle && !isDroppedConnection(err)) throw err;
      } finally {
        connection.close();
      }
      await sleep(backoffMs(this.#retry, drops), signal);
    }
  }

  /**
   * Waits over the run's event stream until the assignment is settled, then reads it with its stored
   * projection. `after`: an event id read before the call was created (its events all come later);
   * 0, the default, reads the run's events from the start.
   */
  settled(runId: string, assignmentId: string, options: EventOptions = {}): Promise<Assignment> {
    return this.#waitFor(runId, assignmentId, SETTLED, options);
  }

  /** As `settled`, but a call that submitted a background task is answered by its submission. */
  answered(runId: string, assignmentId: string, options: EventOptions = {}): Promise<Assignment> {
    return this.#waitFor(runId, assignmentId, ANSWERED, options);
  }

  /**
   * The run's background task results after the first `seen` (in arrival order), waiting over the
   * run's event stream (`task_result`) until there is at least one. Each is a history entry of its
   * own: hand it to the model as a new message, after the tool calls it follows (`after_tool_calls`).
   */
  async taskResults(runId: string, seen: number, options: CallOptions = {}): Promise<TaskResult[]> {
    const signal = callSignal(options);
    const read = async () => (await this.history(runId, signal ? { signal } : {})).task_results.slice(seen);
    // Taken before the history is read: a result the history does not hold yet has its event after it.
    const after = this.#newestEvent.get(runId) ?? 0;
    const held = await read();
    if (held.length > 0) return held;
    const events = this.runEvents(runId, { ...(signal ? { signal } : {}), after });
    try {
      for await (const { event } of events) {
        if (event.type !== "task_result") continue;
        const fresh = await read();
        if (fresh.length > 0) return fresh;
      }
    } finally {
      await events.return(undefined);
    }
    return read();
  }

  #sawEvent(runId: string, id: number): void {
    if (id <= (this.#newestEvent.get(runId) ?? 0)) return;
    // Re-inserted, so the map's first key is the run followed least recently.
    this.#newestEvent.delete(runId);
    this.#newestEvent.set(runId, id);
    if (this.#newestEvent.size > RUNS_FOLLOWED) this.#newestEvent.delete(this.#newestEvent.keys().next().value!);
  }

  async #waitFor(runId: string, assignmentId: string, states: ReadonlySet<AssignmentState>, options: EventOptions): Promise<Assignment> {
    const signal = callSignal(options);
    const events = this.runEvents(runId, { ...(signal ? { signal } : {}), after: options.after ?? 0 });
    try {
      for await (const { event } of events) {
        if (event.type === "assignment" && event.assignment_id === assignmentId && states.has(event.to)) break;
      }
    } finally {
      await events.return(undefined);
    }
    return this.getAssignment(assignmentId, signal ? { signal } : {});
  }

  async #call<K extends OperationId>(
    id: K,
    params: Record<string, string>,
    body: unknown,
    options?: CallOptions & { query?: Record<string, string> },
  ): Promise<ResponseBody<K>> {
    const signal = callSignal(options);
    const { method } = operations[id];
    const response = await sendWithRetry(
      () =>
        fetch(this.#url(id, params, options?.query), {
          method,
          headers: { ...this.#headers(), ...(body === undefined ? {} : { "content-type": "application/json" }) },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
          ...(signal ? { signal } : {}),
        }),
      id,
      this.#retry,
      signal,
    );
    return (await response.json()) as ResponseBody<K>;
  }

  #url(id: OperationId, params: Record<string, string>, query: Record<string, string> = {}): URL {
    const path = operations[id].path.replace(/\{(\w+)\}/g, (_, name: string) => {
      const value = params[name];
      if (value === undefined) throw new Error(`${id}: path parameter '${name}' is missing`);
      return encodeURIComponent(value);
    });
    const url = new URL(path, this.#baseUrl);
    for (const [name, value] of Object.entries(query)) url.searchParams.set(name, value);
    return url;
  }

  #headers(): Record<string, string> {
    return { authorization: `Bearer ${this.#apiKey}` };
  }
}

/** A created (or found again) tool call. */
export class ToolCall {
  constructor(
    readonly client: ToolgateClient,
    /** false when the same `tool_call_id` was created before. */
    readonly created: boolean,
    /** The assignment as it was when the call was answered. */
    readonly assignment: Assignment,
    /** An event id of its run read before the call was created (0: none): `result()` reads the run's events after it. */
    readonly eventsAfter = 0,
  ) {}

  get assignmentId(): string {
    return this.assignment.assignment_id;
  }

  /**
   * Waits (over the run's event stream, no polling) until the tool call is answered and answers its
   * assignment: `context_preview` is the stored projection the model sees; `outcome` says why not, when
   * it did not complete. A call that submitted a background task is answered at once with its
   * submission (`state: "submitted"`, `task`): its outcome arrives later as a task result
   * (`client.taskResults`).
   */
  result(options?: CallOptions): Promise<Assignment> {
    return this.client.answered(this.assignment.run_id, this.assignment.assignment_id, { ...options, after: this.eventsAfter });
  }
}
