import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { toNodeHandler, toWebRequest } from "@modelcontextprotocol/node";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import { createMcpHandler, isLegacyRequest, type AuthInfo } from "@modelcontextprotocol/server";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { SessionIdSchema } from "../config/ids.js";
import { ToolgateError } from "../errors/toolgate-error.js";
import type { IdentityRegistry } from "../http/identities.js";
import type { TokenBuckets } from "../http/rate-limit.js";
import { authorize } from "../http/register.js";
import { fastifyPath } from "../http/route.js";
import { zodDetails } from "../validation/details.js";
import { modernSessionServer } from "./modern-server.js";
import { sessionServer } from "./session-server.js";
import type { SessionToolsDeps } from "./session-tools.js";

/** The version toolgate's MCP server announces: the package's (the same path from `src/` and `dist/`). */
export const MCP_SERVER_VERSION = (JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }).version;

/** The MCP endpoint of a toolgate session (Streamable HTTP: POST messages, GET its stream, DELETE ends it). */
export const MCP_PATH = "/v1/sessions/{session_id}/mcp";

interface Connection {
  transport: StreamableHTTPServerTransport;
  sessionId: string;
  identity: string;
  /** Aborts when the connection closes (a client disconnect, never a cancel). */
  closed: AbortController;
}

/**
 * Serves MCP over Streamable HTTP on the gateway's own server, behind the same bearer keys,
 * permission (`runtime:write`: the endpoint executes tools), rate limit and agent scope as the
 * runtime API, in both revisions clients speak. A request of the 2026-07-28 revision (SDK 2.x tells
 * it by its per-request `_meta` envelope) is served by a fresh stateless server. Any other is
 * 2025-11-25 (SDK 1.x): an MCP session (`Mcp-Session-Id`) lives in this process, bound to the
 * toolgate session of its URL and the identity that opened it. The run tools are called on is
 * neither's (see `sessionMcpRunId`).
 */
export function registerMcpEndpoint(
  app: FastifyInstance,
  deps: SessionToolsDeps,
  maxSessions: number,
  identities: IdentityRegistry,
  limits?: TokenBuckets,
): void {
  // In order of last use: the first is the one closed when a new session would pass `maxSessions`.
  const connections = new Map<string, Connection>();
  // The toolgate session a 2026-07-28 request is bound to reaches its server as the request's auth info.
  const modern = createMcpHandler((ctx) => modernSessionServer(deps, (ctx.authInfo?.extra as { sessionId: string }).sessionId), {
    legacy: "reject",
    onerror: (err) => deps.log.info({ err }, "MCP 2026-07-28 request refused or failed"),
  });
  const serveModern = toNodeHandler(modern, { onerror: (err) => deps.log.warn({ err }, "MCP 2026-07-28 request failed") });

  const handler = async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const raw = (request.params as { session_id?: unknown }).session_id;
    const sessionId = SessionIdSchema.safeParse(raw);
    if (!sessionId.success) throw ToolgateError.validation(zodDetails(sessionId.error, SessionIdSchema, raw, ["params", "session_id"]));
    const session = await deps.store.getSession(sessionId.data);
    if (!session) throw new ToolgateError("session_not_found", `session '${sessionId.data}' does not exist: create one with POST /v1/sessions`);
    const identity = request.identity!;
    if (!identity.inScope(session.agent))
      throw new ToolgateError("agent_out_of_scope", `identity '${identity.name}' is not scoped to agent '${session.agent}'`);

    if (request.method === "POST" && !(await isLegacyRequest(await toWebRequest(request.raw, request.body), request.body))) {
      const auth: AuthInfo = { token: "", clientId: identity.name, scopes: [], extra: { sessionId: session.session_id } };
      reply.hijack(); // the SDK's handler writes the response
      await serveModern(Object.assign(request.raw, { auth }), reply.raw, request.body);
      return;
    }

    const mcpSession = request.headers["mcp-session-id"];
    let connection: Connection | undefined;
    if (typeof mcpSession === "string") {
      connection = connections.get(mcpSession);
      // Another session's or another identity's MCP session is as unknown here as an ended one.
      if (!connection || connection.sessionId !== session.session_id || connection.identity !== identity.name)
        throw new ToolgateError("mcp_session_not_found", `MCP session '${mcpSession}' is not open on session '${session.session_id}': initialize a new one`);
      connections.delete(mcpSession);
      connections.set(mcpSession, connection);
    } else if (request.method === "POST" && isInitializeRequest(request.body)) {
      connection = open(session.session_id, identity.name);
    } else {
      throw new ToolgateError("mcp_session_required", "send the Mcp-Session-Id header of an initialized MCP session, or POST an initialize request");
    }
    reply.hijack(); // the SDK's transport writes the response
    await connection.transport.handleRequest(request.raw, reply.raw, request.body);
  };

  function open(sessionId: string, identity: string): Connection {
    const connection: Connection = {
      transport: new StreamableHTTPServerTransport({ sessionIdGenerator: randomUUID, onsessioninitialized: (id) => admit(id, connection) }),
      sessionId,
      identity,
      closed: new AbortController(),
    };
    const server = sessionServer(deps, sessionId, connection.closed.signal);
    connection.transport.onclose = () => {
      connection.closed.abort();
      if (connection.transport.sessionId) connections.delete(connection.transport.sessionId);
    };
    void server.connect(connection.transport);
    return connection;
  }

  function admit(id: string, connection: Connection): void {
    connections.set(id, connection);
    if (connections.size <= maxSessions) return;
    const [, oldest] = connections.entries().next().value!;
    void oldest.transport.close(); // its onclose forgets it
  }

  for (const method of ["POST", "GET", "DELETE"] as const)
    app.route({
      method,
      url: fastifyPath(MCP_PATH),
      onRequest: authorize({ method, path: MCP_PATH, permissions: ["runtime:write"] }, identities, limits),
      handler,
    });
  // Open MCP streams would hold the server's close: end them first (their calls go on, as after any disconnect).
  app.addHook("preClose", async () => {
    await Promise.all([...connections.values()].map((c) => c.transport.close()));
    await modern.close();
  });
}
