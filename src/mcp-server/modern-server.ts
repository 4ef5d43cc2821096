import { Server, type CallToolResult, type ListToolsResult } from "@modelcontextprotocol/server";
import { sessionMcpRunId } from "../execution/model/ids.js";
import { faultsAsProtocolErrors } from "./sdk-errors.js";
import { SessionTasks } from "./session-tasks.js";
import { answerToolCall, createToolCall, progressForwarder, sessionTools, type SessionToolsDeps } from "./session-tools.js";
import { createdTask, declaresTasks, serveTasksExtension } from "./tasks-extension.js";

/**
 * The MCP server of one 2026-07-28 request (SDK 2.x: stateless, one instance per HTTP exchange;
 * `server/discover`, the `Mcp-Method`/`Mcp-Name` headers and `resultType` are the SDK's), bound to
 * one toolgate session. The same tools and answers as the 2025-11-25 server. A `tools/call` whose
 * request declares the tasks extension is answered with its task (the assignment, stored before the
 * answer: see `serveTasksExtension`); any other waits for its answer, progress on its stream. A
 * request has no cancel of its own in this revision: its HTTP stream ending is a client disconnect,
 * and the call goes on.
 */
export function modernSessionServer(deps: SessionToolsDeps, sessionId: string): Server {
  const { store, execution } = deps;
  const runId = sessionMcpRunId(sessionId);
  const server = new Server({ name: "toolgate", version: deps.version }, { capabilities: { tools: { listChanged: false } } });
  serveTasksExtension(server, new SessionTasks(execution, runId));

  server.setRequestHandler("tools/list", () => faultsAsProtocolErrors(async () => ({ tools: await sessionTools(store, sessionId) }) as ListToolsResult));

  server.setRequestHandler("tools/call", (request, ctx) =>
    faultsAsProtocolErrors(async () => {
      const params = request.params as { name: string; arguments?: Record<string, unknown> };
      const asTask = declaresTasks(ctx);
      const created = await createToolCall(execution, sessionId, runId, { ...params, _meta: ctx.mcpReq._meta }, { waited: !asTask });
      if ("answer" in created) return created.answer as CallToolResult;
      // The SDK passes a handler's `resultType` through on tools/call; its types do not name the extension's result.
      if (asTask) return createdTask(await execution.history.createdView(created.assignment)) as unknown as CallToolResult;
      const onProgress = progressForwarder(ctx.mcpReq._meta?.progressToken, (notification) => ctx.mcpReq.notify(notification));
      return (await answerToolCall(deps, created, ctx.mcpReq.signal, () => true, onProgress)) as CallToolResult;
    }),
  );
  return server;
}
