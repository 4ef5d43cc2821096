import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ConfigStore } from "../../src/config/config-store.js";
import type { ExecutionOptions } from "../../src/execution/execution.js";
import { createGateway, type Gateway, type GatewayOptions } from "../../src/gateway/gateway.js";
import { gatewayConfigFromEnv } from "../../src/gateway/config.js";
import type { IdentityConfig } from "../../src/http/identities.js";
import { PERMISSIONS } from "../../src/http/identities.js";
import { createLogger } from "../../src/log/logger.js";

export const ADMIN_KEY = "test-admin-key-0123456789";
export const SCOPED_KEY = "test-scoped-key-0123456789abcdef";
export const admin: IdentityConfig = { name: "admin", key: ADMIN_KEY, agents: "*", permissions: [...PERMISSIONS] };
/** Runtime access to another agent only: it must not see or touch the test agent's runs. */
export const otherAgent: IdentityConfig = { name: "other-agent", key: SCOPED_KEY, agents: ["someone-else"], permissions: ["runtime:read", "runtime:write"] };
export const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

/** A gateway on the given NATS (never embedded), with a temporary data dir, on a random HTTP port. */
export async function startTestGateway(natsUrl: string, identities: IdentityConfig[] = [admin], options: Omit<GatewayOptions, "config" | "logger"> = {}): Promise<Gateway & { dataDir: string }> {
  const dataDir = mkdtempSync(join(tmpdir(), "toolgate-gw-"));
  const config = gatewayConfigFromEnv({ NATS_URL: natsUrl, TOOLGATE_HTTP_PORT: "0", TOOLGATE_DATA_DIR: dataDir, TOOLGATE_IDENTITIES: JSON.stringify(identities) });
  const gateway = await createGateway({ ...options, config, logger: createLogger({ level: process.env.TEST_LOG_LEVEL ?? "silent" }) });
  return {
    ...gateway,
    dataDir,
    async close() {
      await gateway.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** A listening test gateway for the execution path: the admin and `otherAgent`, JSON over real HTTP. */
export interface ExecutionTestGateway {
  readonly gateway: Gateway;
  readonly baseUrl: string;
  /** JSON request as the admin (or with `key`); resolves to status and parsed body. */
  http(method: string, path: string, body?: unknown, key?: string): Promise<{ status: number; body: any }>;
  close(): Promise<void>;
}

export async function startExecutionGateway(natsUrl: string, execution: Partial<ExecutionOptions> = {}): Promise<ExecutionTestGateway> {
  const gateway = await startTestGateway(natsUrl, [admin, otherAgent], { execution });
  const baseUrl = await gateway.listen();
  return {
    gateway,
    baseUrl,
    async http(method, path, body, key = ADMIN_KEY) {
      const res = await fetch(baseUrl + path, {
        method,
        headers: { ...bearer(key), ...(body === undefined ? {} : { "content-type": "application/json" }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : undefined };
    },
    close: () => gateway.close(),
  };
}

export const bindingExample = { binding_id: "binding_example", executor_scope: "tasks-product", tool_kind: "read" };

/** The seed's tool definition (PROTOCOL.md / seed text). */
export const tasksRead = {
  name: "tasks.read",
  description: "Read tasks page by page",
  binding_id: "binding_example",
  input_schema: { type: "object", properties: { cursor: { type: "string" } } },
  output_schema: { type: "object" },
  max_result_context_bytes: 16384,
};

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
    if (!(await store.getBinding(t.binding_id))) await store.putBinding({ binding_id: t.binding_id, executor_scope: opts.scope, tool_kind: t.tool_kind ?? "read" });
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
