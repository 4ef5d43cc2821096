import { connect, type NatsConnection } from "@nats-io/transport-node";
import type { ConfigStore } from "../../src/config/config-store.js";
import type { ExecutionOptions } from "../../src/execution/execution.js";
import type { Gateway } from "../../src/gateway/gateway.js";
import { loadDefinitions, type Definition } from "../../src/streams/index.js";
import { executorInboxPrefix } from "../../src/wire/subjects.js";
import { ADMIN_KEY, admin, startTestGateway } from "./gateway.js";
import { startTestNats, type TestNats } from "./nats.js";
import { ProtocolExecutor } from "./protocol-executor.js";

export { ADMIN_KEY };
export const SCOPED_KEY = "test-scoped-key-0123456789abcdef";

/** A gateway on a test NATS, listening on a random port, with an all-agents admin and an identity scoped to another agent. */
export interface TestGateway {
  readonly gateway: Gateway;
  readonly baseUrl: string;
  /** JSON request as the admin (or with `key`); resolves to status and parsed body. */
  http(method: string, path: string, body?: unknown, key?: string): Promise<{ status: number; body: any }>;
  /** JSON request as the admin; resolves to the parsed body, throws on a non-2xx answer. */
  api<T = any>(method: "GET" | "POST", path: string, body?: unknown): Promise<T>;
  close(): Promise<void>;
}

/** A short lease and sweep, so a test of a crashed or stalled executor does not wait long for its claim to expire. */
export const SHORT_LEASES: Partial<ExecutionOptions> = { leaseMs: 3_000, sweepIntervalMs: 200, candidateAckWaitMs: 5_000 };

/** `env` adds gateway environment variables (NATS credentials, TLS, limits); `definitions` replaces `streams/`. */
export async function startExecutionGateway(
  natsUrl: string,
  execution: Partial<ExecutionOptions> = {},
  env: Record<string, string> = {},
  definitions?: Definition[],
): Promise<TestGateway> {
  const gateway = await startTestGateway(
    natsUrl,
    [admin, { name: "other-agent", key: SCOPED_KEY, agents: ["someone-else"], permissions: ["runtime:read", "runtime:write"] }],
    { execution, env, ...(definitions ? { definitions } : {}) },
  );
  const baseUrl = await gateway.listen();
  return {
    gateway,
    baseUrl,
    http: (method, path, body, key) => requestJson(baseUrl, method, path, body, key),
    async api(method, path, body) {
      const res = await requestJson(baseUrl, method, path, body);
      if (res.status >= 300) throw new Error(`${method} ${path}: HTTP ${res.status} ${JSON.stringify(res.body)}`);
      return res.body;
    },
    close: () => gateway.close(),
  };
}

/** One JSON request to a gateway at `baseUrl`, as the admin (or with `key`); resolves to status and parsed body. */
export async function requestJson(baseUrl: string, method: string, path: string, body?: unknown, key = ADMIN_KEY): Promise<{ status: number; body: any }> {
  const res = await fetch(baseUrl + path, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

export interface SeededTool {
  name: string;
  binding_id: string;
  tool_kind?: "read" | "write";
  max_result_context_bytes?: number;
  input_schema?: Record<string, unknown>;
}

/** Registers bindings, publishes a toolset and an agent version and opens a session; returns its id. */
export async function seedSession(store: ConfigStore, opts: { scope: string; agent: string; tools: SeededTool[]; subject?: string }): Promise<string> {
  for (const t of opts.tools) {
    if (!(await store.getBinding(t.binding_id)))
      await store.putBinding({ binding_id: t.binding_id, executor_scope: opts.scope, tool_kind: t.tool_kind ?? "read" });
  }
  const toolset = `ts-${opts.agent}`;
  const published = await store.listToolsetVersions(toolset);
  const version = `v${published.length + 1}`;
  await store.publishToolsetVersion(toolset, {
    version,
    tools: opts.tools.map((t) => ({
      name: t.name,
      description: `test tool ${t.name}`,
      binding_id: t.binding_id,
      input_schema: t.input_schema ?? { type: "object" },
      output_schema: { type: "object" },
      max_result_context_bytes: t.max_result_context_bytes ?? 16_384,
    })),
  });
  const agentVersion = await store.publishAgentVersion(opts.agent, { toolset, toolset_version: version, max_context_tokens: 100_000 });
  const session = await store.createSession({ agent_version: agentVersion.agent_version, subject: opts.subject ?? "user-1" });
  return session.session_id;
}

/** Creates a tool call and drives it to `completed` with `result`, as `executor` would; returns the assignment id. */
export async function completeToolCall(gw: TestGateway, executor: ProtocolExecutor, runId: string, toolName: string, result: unknown): Promise<string> {
  const created = await gw.http("POST", `/v1/runs/${runId}/tool-calls`, { tool_name: toolName, arguments: {} });
  if (created.status !== 201) throw new Error(`tool call refused: ${created.status} ${JSON.stringify(created.body)}`);
  const id: string = created.body.assignment.assignment_id;
  await executor.heartbeat(); // presence expires; a long test must not outlive it
  const candidate = await executor.pullFor(id);
  const reply = await executor.claim(id, candidate.generation);
  if (reply.status !== "granted") throw new Error(`claim refused: ${reply.code}`);
  const accepted = await executor.send(executor.accepted(reply.grant));
  const completed = await executor.send(executor.receipt(reply.grant, { kind: "completed", result }));
  if (accepted.status !== "recorded" || completed.status !== "recorded") throw new Error(`receipts not recorded: ${accepted.status}, ${completed.status}`);
  return id;
}

/** The package's `streams/` with a shorter presence TTL, so presence expiry is observable in a test. */
export function definitionsWithPresenceTtl(ttlMs: number): Definition[] {
  return loadDefinitions().map((d) => (d.kind === "kv" && d.bucket === "tg_presence" ? { ...d, ttl_ms: ttlMs } : d));
}

/** A test NATS, a gateway on it, a session of `tools`, and a protocol executor of the scope on its own connection. */
export interface ExecutionFixture {
  readonly nats: TestNats;
  readonly gw: TestGateway;
  /** The executor's connection (its own inbox prefix), also for the test's own JetStream and KV reads. */
  readonly nc: NatsConnection;
  readonly executor: ProtocolExecutor;
  readonly sessionId: string;
  /** Closes what was started, the executor first, the server last. */
  close(): Promise<void>;
}

export interface ExecutionFixtureOptions {
  scope: string;
  agent: string;
  tools: SeededTool[];
  /**
   * The protocol executor: its id, its bindings (default: the tools' bindings), and how it starts:
   * `heartbeat` (online, refused otherwise), `register` (in the registry, no presence yet), or nothing.
   */
  executor: { id: string; bindings?: string[]; start?: "heartbeat" | "register" };
  execution?: Partial<ExecutionOptions>;
  env?: Record<string, string>;
  definitions?: Definition[];
}

/** Starts an {@link ExecutionFixture}; should any step fail, what already started is closed before the error is thrown. */
export async function startExecutionFixture(options: ExecutionFixtureOptions): Promise<ExecutionFixture> {
  const closers: Array<() => Promise<unknown> | void> = [];
  const close = async () => {
    for (const closer of closers.splice(0).reverse()) await closer();
  };
  try {
    const nats = await startTestNats();
    closers.push(() => nats.stop());
    const gw = await startExecutionGateway(nats.url, options.execution, options.env, options.definitions);
    closers.push(() => gw.close());
    const sessionId = await seedSession(gw.gateway.store, { scope: options.scope, agent: options.agent, tools: options.tools });
    const { id, bindings = [...new Set(options.tools.map((t) => t.binding_id))], start } = options.executor;
    const nc = await connect({ servers: nats.url, inboxPrefix: executorInboxPrefix(options.scope, id) });
    closers.push(() => nc.close());
    const executor = new ProtocolExecutor(nc, options.scope, id, bindings);
    closers.push(() => executor.close());
    if (start === "register") await executor.register();
    if (start === "heartbeat") {
      const reply = await executor.heartbeat();
      if (reply.status !== "ok") throw new Error(`executor ${id} refused at its first heartbeat: ${reply.code} ${reply.reason}`);
    }
    return { nats, gw, nc, executor, sessionId, close };
  } catch (err) {
    await close();
    throw err;
  }
}
