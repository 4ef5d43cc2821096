import { createRequire } from "node:module";
import { runCli } from "../helpers/serve.js";
import { until } from "../helpers/until.js";
import { ADMIN_KEY, type TestGateway } from "../helpers/execution-gateway.js";

const require = createRequire(import.meta.url);

/** The entry script of an installed reference MCP server (a dev dependency), started with this node. */
export function referenceServer(pkg: "@modelcontextprotocol/server-everything" | "@modelcontextprotocol/server-memory"): string {
  return require.resolve(`${pkg}/dist/index.js`);
}

/** server-everything's own tiny image (base64), to compare what reaches history with byte for byte. */
export async function referenceImage(): Promise<string> {
  const module = require.resolve("@modelcontextprotocol/server-everything/dist/tools/get-tiny-image.js");
  return ((await import(module)) as { MCP_TINY_IMAGE: string }).MCP_TINY_IMAGE;
}

export const TERMINAL = new Set(["completed", "failed", "cancelled", "reconciliation_required"]);

/**
 * `toolgate mcp import --publish` against the test gateway, then an agent version on that toolset and
 * a session; returns the session id and what the import printed.
 */
export async function publishMcpServer(
  gw: TestGateway,
  args: { importArgs: string[]; toolset: string; agent: string; env?: Record<string, string> },
): Promise<{ sessionId: string; printed: any }> {
  const res = await runCli(["mcp", "import", "--toolset", args.toolset, "--publish", "--gateway", gw.baseUrl, ...args.importArgs], {
    TOOLGATE_API_KEY: ADMIN_KEY,
    ...args.env,
  });
  if (res.code !== 0) throw new Error(`mcp import failed (${res.code}): ${res.stderr}`);
  const agentVersion = await gw.api("POST", `/v1/agents/${args.agent}/versions`, { toolset: args.toolset, toolset_version: "v1", max_context_tokens: 100_000 });
  const session = await gw.api("POST", "/v1/sessions", { agent_version: agentVersion.agent_version, subject: "user-42" });
  return { sessionId: session.session_id, printed: JSON.parse(res.stdout) };
}

/** Registers an executor through the HTTP API, as an operator does: its bindings, and no nkey (the test server has no NATS authorization to prove one). */
export async function registerExecutor(gw: TestGateway, executorId: string, scope: string, bindings: string[]): Promise<void> {
  await gw.api("POST", "/v1/executors", { executor_id: executorId, scope, bindings });
}

/** A run with one tool call; resolves to the run and assignment ids. */
export async function toolCall(gw: TestGateway, sessionId: string, toolName: string, args: unknown): Promise<{ runId: string; assignmentId: string }> {
  const run = await gw.api("POST", `/v1/sessions/${sessionId}/runs`);
  const { assignment } = await gw.api("POST", `/v1/runs/${run.run_id}/tool-calls`, { tool_name: toolName, arguments: args });
  return { runId: run.run_id, assignmentId: assignment.assignment_id };
}

export function settled(gw: TestGateway, assignmentId: string, timeoutMs = 30_000): Promise<any> {
  return until(
    `assignment ${assignmentId} to settle`,
    async () => {
      const a = await gw.api("GET", `/v1/assignments/${assignmentId}`);
      return TERMINAL.has(a.state) ? a : undefined;
    },
    timeoutMs,
  );
}

/** The executors `toolgate status --json` lists as online. */
export async function onlineExecutors(natsUrl: string): Promise<string[]> {
  const res = await runCli(["status", "--json"], { NATS_URL: natsUrl });
  return (JSON.parse(res.stdout) as { executors: Array<{ executor_id: string }> }).executors.map((e) => e.executor_id);
}
