import { ProtocolError, Server, type CallToolResult, type ListToolsResult } from "@modelcontextprotocol/server";
import { sessionMcpRunId } from "../execution/model/ids.js";
import { answerToolCall, createToolCall, McpFault, progressForwarder, sessionTools, type SessionToolsDeps } from "./session-tools.js";

/** Rethrows a protocol fault as the 2.x SDK's error class. */
async function faultsAsProtocolErrors<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    throw err instanceof McpFault ? new ProtocolError(err.code, err.message) : err;
  }
}

/**
 * The MCP server of one 2026-07-28 request (SDK 2.x: stateless, one instance per HTTP exchange;
 * `server/discover`, the `Mcp-Method`/`Mcp-Name` headers and `resultType` are the SDK's), bound to
 * one toolgate session. The same tools and answers as the 2025-11-25 server. No tasks: SDK 2.x
 * does not implement the `io.modelcontextprotocol/tasks` extension. A request has no cancel of its
 * own in this revision: its HTTP stream ending is a client disconnect, and the call goes on.
 */
export function modernSessionServer(deps: SessionToolsDeps, sessionId: string): Server {
  const { store, execution } = deps;
  const runId = sessionMcpRunId(sessionId);
  const server = new Server({ name: "toolgate", version: deps.version }, { capabilities: { tools: { listChanged: false } } });

  server.setRequestHandler("tools/list", () => faultsAsProtocolErrors(async () => ({ tools: await sessionTools(store, sessionId) }) as ListToolsResult));

  server.setRequestHandler("tools/call", (request, ctx) =>
    faultsAsProtocolErrors(async () => {
      const params = request.params as { name: string; arguments?: Record<string, unknown> };
      const created = await createToolCall(execution, sessionId, runId, { ...params, _meta: ctx.mcpReq._meta });
      if ("answer" in created) return created.answer as CallToolResult;
      const onProgress = progressForwarder(ctx.mcpReq._meta?.progressToken, (notification) => ctx.mcpReq.notify(notification));
      return (await answerToolCall(deps, created.call, ctx.mcpReq.signal, () => true, onProgress)) as CallToolResult;
    }),
  );
  return server;
}
