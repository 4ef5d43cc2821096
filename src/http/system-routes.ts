import { z } from "zod";
import { ApiError } from "./errors.js";
import { defineRoute, type RouteDef } from "./route.js";

export interface Readiness {
  ready: boolean;
  checks: Record<string, string>;
}

const ReadinessSchema = z.object({ ready: z.boolean(), checks: z.record(z.string(), z.string()) });

/** Unauthenticated endpoints: liveness, readiness and the OpenAPI document. */
export function systemRoutes(deps: { readiness: () => Promise<Readiness>; openapi: () => Record<string, unknown> }): RouteDef[] {
  return [
    defineRoute({
      id: "healthz",
      method: "GET",
      path: "/healthz",
      summary: "Liveness: the process is up",
      tags: ["system"],
      permissions: "public",
      errors: [],
      response: z.object({ status: z.literal("ok") }),
      handler: async () => ({ status: "ok" as const }),
    }),
    defineRoute({
      id: "readyz",
      method: "GET",
      path: "/readyz",
      summary: "Readiness: NATS connected and every declared stream present (503 otherwise)",
      tags: ["system"],
      permissions: "public",
      errors: ["not_ready"],
      response: ReadinessSchema,
      handler: async () => {
        const readiness = await deps.readiness();
        if (!readiness.ready) throw new ApiError("not_ready", `not ready: ${JSON.stringify(readiness.checks)}`);
        return readiness;
      },
    }),
    defineRoute({
      id: "openapi",
      method: "GET",
      path: "/v1/openapi.json",
      summary: "This API's OpenAPI 3.1 document, generated from the schemas that validate requests",
      tags: ["system"],
      permissions: "public",
      errors: [],
      response: z.record(z.string(), z.unknown()),
      handler: async () => deps.openapi(),
    }),
  ];
}
