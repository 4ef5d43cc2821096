import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { pino } from "pino";
import { ConfigStore } from "../../../src/config/config-store.js";
import { startExecution, type Execution, type ExecutionOptions } from "../../../src/execution/execution.js";
import { executionRoutes } from "../../../src/execution/routes.js";
import { createGateway, type Gateway } from "../../../src/gateway/gateway.js";
import { PERMISSIONS } from "../../../src/http/identities.js";
import { ensureStreams, loadDefinitions } from "../../../src/streams/index.js";

/** The whole gateway in this process (config plane, execution path, HTTP) on a test NATS server. */
export interface TestGateway {
  readonly baseUrl: string;
  readonly apiKey: string;
  /** JSON over HTTP with the admin key; throws on a non-2xx answer. */
  api<T = any>(method: "GET" | "POST", path: string, body?: unknown): Promise<T>;
  close(): Promise<void>;
}

export async function startTestGateway(natsUrl: string, options: Partial<ExecutionOptions> = {}): Promise<TestGateway> {
  const logger = pino({ level: process.env.TEST_GATEWAY_LOG ?? "silent" });
  const dataDir = mkdtempSync(join(tmpdir(), "toolgate-gw-"));
  const apiKey = `test-admin-key-${Math.random().toString(36).slice(2)}`;
  const nc: NatsConnection = await connect({ servers: natsUrl, maxReconnectAttempts: -1, reconnectTimeWait: 250 });
  const definitions = loadDefinitions();
  await ensureStreams(await jetstreamManager(nc), definitions, { replicas: 1 });
  const store = await ConfigStore.open(nc);
  const execution: Execution = await startExecution({ nc, config: store, definitions, log: logger, options: { leaseMs: 3_000, sweepIntervalMs: 200, candidateAckWaitMs: 5_000, ...options } });
  const gateway: Gateway = await createGateway({
    config: {
      NATS_URL: natsUrl,
      TOOLGATE_HTTP_PORT: 0,
      TOOLGATE_HTTP_HOST: "127.0.0.1",
      TOOLGATE_DATA_DIR: dataDir,
      TOOLGATE_IDENTITIES: JSON.stringify([{ name: "test-admin", key: apiKey, agents: "*", permissions: [...PERMISSIONS] }]),
      TOOLGATE_STREAM_REPLICAS: 1,
      LOG_LEVEL: "silent",
    },
    logger,
    definitions,
    routes: [() => executionRoutes(execution, store)],
  });
  const baseUrl = await gateway.listen();
  return {
    baseUrl,
    apiKey,
    async api(method, path, body) {
      const res = await fetch(baseUrl + path, {
        method,
        headers: { authorization: `Bearer ${apiKey}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const json = (await res.json()) as any;
      if (!res.ok) throw new Error(`${method} ${path}: HTTP ${res.status} ${JSON.stringify(json)}`);
      return json;
    },
    async close() {
      await execution.stop();
      await gateway.close();
      await nc.drain();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Registers a binding, publishes a toolset with `tasks.read` and `tasks.create`, an agent version, and opens a session. */
export async function publishTasksAgent(gw: TestGateway, ids: { scope: string; readBinding: string; writeBinding: string; agent: string }): Promise<{ sessionId: string; agentVersion: string }> {
  await gw.api("POST", "/v1/bindings", { binding_id: ids.readBinding, executor_scope: ids.scope, tool_kind: "read" });
  await gw.api("POST", "/v1/bindings", { binding_id: ids.writeBinding, executor_scope: ids.scope, tool_kind: "write" });
  const toolset = `${ids.agent}-tools`;
  await gw.api("POST", `/v1/toolsets/${toolset}/versions`, {
    version: "v1",
    tools: [
      { name: "tasks.read", description: "Read tasks, a page at a time", binding_id: ids.readBinding, input_schema: { type: "object", properties: { cursor: { type: "string" } } }, output_schema: { type: "object" }, max_result_context_bytes: 1024 },
      { name: "tasks.create", description: "Create a task", binding_id: ids.writeBinding, input_schema: { type: "object", properties: { title: { type: "string" } }, required: ["title"] }, output_schema: { type: "object" } },
    ],
  });
  const agentVersion = await gw.api("POST", `/v1/agents/${ids.agent}/versions`, { toolset, toolset_version: "v1", max_context_tokens: 100_000 });
  const session = await gw.api("POST", "/v1/sessions", { agent_version: agentVersion.agent_version, subject: "user-42" });
  return { sessionId: session.session_id, agentVersion: agentVersion.agent_version };
}

/** Polls `probe` until it returns a value other than undefined; fails after `timeoutMs`. */
export async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ""}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
