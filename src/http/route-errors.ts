import { HTTP_ERRORS, type HttpErrorCode } from "../errors/catalogue.js";
import type { RouteDef } from "./route.js";

/** Answered by the body parser to any request that may carry a body (`src/http/server.ts`). */
const BODY_CODES: readonly HttpErrorCode[] = ["invalid_json", "invalid_utf8", "json_too_deep", "payload_too_large", "unsupported_media_type"];

/**
 * Every code a route can answer: what the route layer adds from its declaration (authentication,
 * permission and rate limit unless public; the agent scope; request validation; body parsing for a
 * method that carries one; `internal` always), and the codes the route declares its handler raises.
 * In catalogue order, without repeats.
 */
export function routeErrorCodes(
  route: Pick<RouteDef, "method" | "permissions" | "agentScope" | "params" | "query" | "body" | "check" | "errors">,
): HttpErrorCode[] {
  const codes = new Set<HttpErrorCode>(route.errors);
  if (route.permissions !== "public") ["unauthenticated", "permission_denied", "rate_limited"].forEach((c) => codes.add(c as HttpErrorCode));
  if (route.agentScope) codes.add("agent_out_of_scope");
  if (route.params || route.query || route.body || route.check) codes.add("validation_failed");
  if (route.method !== "GET") BODY_CODES.forEach((c) => codes.add(c));
  codes.add("internal");
  return (Object.keys(HTTP_ERRORS) as HttpErrorCode[]).filter((c) => codes.has(c));
}
