import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { z } from "zod";
import { zodDetails } from "../validation/details.js";
import { ToolgateError, type ErrorDetail } from "../errors/toolgate-error.js";
import { ApiError } from "./errors.js";
import { EventStream, sendEventStream } from "./event-stream.js";
import type { Identity, IdentityRegistry } from "./identities.js";
import type { TokenBuckets } from "./rate-limit.js";
import { fastifyPath, type RouteDef, type RouteRequest } from "./route.js";

declare module "fastify" {
  interface FastifyRequest {
    identity?: Identity;
  }
}

function parsePart(schema: z.ZodType | undefined, raw: unknown, where: string, details: ErrorDetail[]): unknown {
  if (!schema) return undefined;
  const result = schema.safeParse(raw ?? (where === "body" ? undefined : {}));
  if (result.success) return result.data;
  const prefix = where === "body" ? [] : [where];
  details.push(...zodDetails(result.error, schema, raw, prefix));
  return undefined;
}

/**
 * Order of the checks, so that nothing leaks to a caller who may not see it:
 * identity (401) and permission (403) before the body is even parsed; then the identity's rate limit
 * (429); then request validation (400); then the agent scope (403 `agent_out_of_scope`); then the handler.
 */
export function authorize(route: Pick<RouteDef, "method" | "path" | "permissions">, identities: IdentityRegistry, limits: TokenBuckets | undefined) {
  const admit = (request: FastifyRequest): void => {
    if (route.permissions === "public") return;
    const identity = identities.authenticate(request.headers.authorization);
    if (!identity)
      throw new ApiError("unauthenticated", "send a valid API key as 'Authorization: Bearer <key>'", undefined, {
        "www-authenticate": 'Bearer realm="toolgate"',
      });
    if (!route.permissions.some((p) => identity.permissions.has(p)))
      throw new ApiError(
        "permission_denied",
        `identity '${identity.name}' lacks the permission for ${route.method} ${route.path}: needs one of ${route.permissions.join(", ")}`,
        [
          {
            path: "authorization",
            code: "permission_denied",
            message: `identity '${identity.name}' holds none of the needed permissions`,
            allowed: route.permissions.join("|"),
          },
        ],
      );
    const taken = limits?.take(identity.name);
    if (taken && !taken.ok)
      throw new ApiError("rate_limited", `identity '${identity.name}' exceeded its request rate; retry after ${taken.retryAfterSeconds} s`, undefined, {
        "retry-after": String(taken.retryAfterSeconds),
      });
    request.identity = identity;
  };
  // A callback hook, not an async one: every request runs it, and nothing in it waits.
  return (request: FastifyRequest, _reply: FastifyReply, done: (err?: Error) => void): void => {
    try {
      admit(request);
    } catch (err) {
      return done(err as Error);
    }
    done();
  };
}

function handle(route: RouteDef, streams: Set<AbortController>) {
  return async (request: FastifyRequest, reply: FastifyReply): Promise<unknown> => {
    const details: ErrorDetail[] = [];
    const params = parsePart(route.params, request.params, "params", details);
    const query = parsePart(route.query, request.query, "query", details);
    const body = parsePart(route.body, request.body, "body", details);
    if (route.check) details.push(...(await route.check(request.body)));
    if (details.length > 0) throw ToolgateError.validation(details);

    let gone: AbortController | undefined;
    // Made when a handler first asks for it (an event stream always does): most never do, and an
    // AbortController with a close listener per request was a measurable cost at thousands a second.
    const goneSignal = (): AbortSignal => {
      if (gone) return gone.signal;
      const made = (gone = new AbortController());
      if (reply.raw.destroyed)
        made.abort(); // the client left before anyone asked
      else if (route.stream === "sse") streams.add(made);
      reply.raw.once("close", () => {
        made.abort();
        streams.delete(made);
      });
      return made.signal;
    };
    if (route.stream === "sse") goneSignal(); // ended by the server's close even if its handler never asks
    const req: RouteRequest<unknown, unknown, unknown> = {
      params,
      query,
      body,
      identity: request.identity as Identity,
      headers: request.headers,
      get signal() {
        return goneSignal();
      },
      log: request.log,
    };
    if (route.agentScope) {
      const agent = await route.agentScope(req as never);
      if (agent !== undefined && !req.identity.inScope(agent))
        throw new ApiError("agent_out_of_scope", `identity '${req.identity.name}' is not scoped to agent '${agent}'`);
    }
    const result = await route.handler(req as never);
    if ((route.stream === "sse") !== result instanceof EventStream)
      throw new Error(`route ${route.id}: the handler's result does not match its declared response type`);
    if (result instanceof EventStream) return sendEventStream(reply, result, route.response);
    reply.code(route.status ?? 200);
    return route.response.parse(result);
  };
}

/** Registers every declared route; `limits`, when given, rate-limits each authenticated identity. */
export function registerRoutes(app: FastifyInstance, routes: readonly RouteDef[], identities: IdentityRegistry, limits?: TokenBuckets): void {
  // An event stream ends only when its client leaves, and would hold the server's close for ever: closing
  // ends it first, as a dropped connection (its client resumes with Last-Event-ID once a gateway is back).
  const streams = new Set<AbortController>();
  app.addHook("preClose", async () => streams.forEach((stream) => stream.abort()));
  for (const route of routes) {
    app.route({
      method: route.method,
      url: fastifyPath(route.path),
      config: { exactNumbers: route.exactNumbers === true },
      onRequest: authorize(route, identities, limits),
      handler: handle(route, streams),
    });
  }
}
