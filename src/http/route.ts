import type { IncomingHttpHeaders } from "node:http";
import type { FastifyBaseLogger } from "fastify";
import { z } from "zod";
import type { HttpErrorCode } from "../errors/catalogue.js";
import type { ErrorDetail } from "../errors/toolgate-error.js";
import type { EventStream } from "./event-stream.js";
import type { Identity, Permission } from "./identities.js";

type Obj = z.ZodObject;
type Infer<S> = S extends z.ZodType ? z.infer<S> : undefined;

/** What a handler (and the scope and check hooks) receive: the validated request. */
export interface RouteRequest<P, Q, B> {
  params: P;
  query: Q;
  body: B;
  identity: Identity;
  headers: IncomingHttpHeaders;
  /** Aborts when the client goes away (what ends an event stream). */
  signal: AbortSignal;
  log: FastifyBaseLogger;
}

/**
 * One HTTP endpoint, declared once: the same declaration registers the fastify route, validates the
 * request, enforces identity/permission/agent scope, and becomes an OpenAPI operation.
 */
export interface RouteDef<
  P extends Obj | undefined = Obj | undefined,
  Q extends Obj | undefined = Obj | undefined,
  B extends z.ZodType | undefined = z.ZodType | undefined,
  R extends z.ZodType = z.ZodType,
> {
  /** OpenAPI operationId; also names the route in tests. */
  id: string;
  method: "GET" | "POST" | "PUT" | "DELETE";
  /** OpenAPI-style path with `{param}` and optional custom verb suffix: `/v1/runs/{run_id}:cancel`. */
  path: string;
  summary: string;
  tags?: string[];
  params?: P;
  query?: Q;
  body?: B;
  /** The response body; for `stream: "sse"` the data of one event. */
  response: R;
  /** `sse`: the handler returns an `EventStream`, served as `text/event-stream`. */
  stream?: "sse";
  /** Success status, 200 unless given (201 for creations). */
  status?: number;
  /** The caller needs any one of these; `public` routes need no identity at all. */
  permissions: readonly Permission[] | "public";
  /**
   * The agent the request targets, for the identity's agent scope (403 `agent_out_of_scope`).
   * Routes without it are not agent-scoped. Return undefined when the target does not exist (the
   * handler then answers 404).
   */
  agentScope?: (req: RouteRequest<Infer<P>, Infer<Q>, Infer<B>>) => string | undefined | Promise<string | undefined>;
  /** The body carries a product's values (arguments, results): its numbers are read exactly (bigint, `1.0`). */
  exactNumbers?: true;
  /**
   * The catalogue codes the handler (and `check`) can answer. The route layer's own (authentication,
   * permission, rate limit, agent scope, validation, body parsing, `internal`) follow from the rest of
   * the declaration (`routeErrorCodes`); the OpenAPI document lists both per route.
   */
  errors: readonly HttpErrorCode[];
  /** Rules beyond the body schema, run on the raw body so they are reported with the schema's errors. */
  check?: (rawBody: unknown) => Promise<ErrorDetail[]>;
  handler: (req: RouteRequest<Infer<P>, Infer<Q>, Infer<B>>) => Promise<z.input<R> | EventStream>;
}

/** Identity function that makes TypeScript infer a route's schema types for its handler. */
export function defineRoute<
  P extends Obj | undefined = undefined,
  Q extends Obj | undefined = undefined,
  B extends z.ZodType | undefined = undefined,
  R extends z.ZodType = z.ZodType,
>(def: RouteDef<P, Q, B, R>): RouteDef {
  return def as unknown as RouteDef;
}

/** `/v1/runs/{run_id}:cancel` -> `/v1/runs/:run_id(^[^:/]+)::cancel` (find-my-way syntax). */
export function fastifyPath(path: string): string {
  return path.replace(/\{(\w+)\}(:[A-Za-z-]+)?|:/g, (match, name: string | undefined, verb: string | undefined) => {
    if (name === undefined) return "::"; // a literal colon elsewhere in the path
    return verb ? `:${name}(^[^:/]+):${verb}` : `:${name}`;
  });
}
