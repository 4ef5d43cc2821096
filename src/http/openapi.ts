import { z } from "zod";
import { ErrorBodySchema, httpStatus } from "./errors.js";
import type { RouteDef } from "./route.js";
import { routeErrorCodes } from "./route-errors.js";

type JsonSchema = Record<string, unknown>;

/**
 * A zod schema as the JSON Schema (2020-12, the OpenAPI 3.1 dialect) of a request (`input`: fields
 * with defaults are optional) or a response (`output`). Schemas carry titles, not ids, so each one is
 * self-contained: the request and response forms of one object differ and must not share a $ref.
 */
function jsonSchema(schema: z.ZodType, io: "input" | "output"): JsonSchema {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: "any" }) as JsonSchema;
  return rest;
}

/** The error answers of one operation, a response per status, each naming the codes of that status it can answer (also as `x-error-codes`). */
function errorResponses(route: RouteDef): Record<string, unknown> {
  const byStatus = new Map<number, string[]>();
  for (const code of routeErrorCodes(route)) byStatus.set(httpStatus(code), [...(byStatus.get(httpStatus(code)) ?? []), code]);
  const errorRef = { $ref: "#/components/schemas/Error" };
  return Object.fromEntries(
    [...byStatus].map(([status, codes]) => [
      String(status),
      { description: `code: ${codes.join(" | ")}`, "x-error-codes": codes, content: { "application/json": { schema: errorRef } } },
    ]),
  );
}

function parameters(schema: z.ZodObject | undefined, where: "path" | "query"): unknown[] {
  if (!schema) return [];
  return Object.entries(schema.shape).map(([name, prop]) => ({
    name,
    in: where,
    required: where === "path" || !(prop as z.ZodType).safeParse(undefined).success,
    schema: jsonSchema(prop as z.ZodType, "input"),
  }));
}

/** The OpenAPI 3.1 document of the given routes, generated from the zod schemas that validate them. */
export function buildOpenApi(routes: readonly RouteDef[], info: { title: string; version: string }): JsonSchema {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    const isPublic = route.permissions === "public";
    (paths[route.path] ??= {})[route.method.toLowerCase()] = {
      operationId: route.id,
      summary: route.summary,
      ...(route.tags ? { tags: route.tags } : {}),
      security: isPublic ? [] : [{ bearerAuth: [] }],
      "x-permissions": isPublic ? [] : route.permissions,
      "x-agent-scoped": route.agentScope !== undefined,
      parameters: [...parameters(route.params, "path"), ...parameters(route.query, "query")],
      ...(route.body ? { requestBody: { required: true, content: { "application/json": { schema: jsonSchema(route.body, "input") } } } } : {}),
      responses: {
        [String(route.status ?? 200)]: {
          description: route.stream === "sse" ? "Server-Sent Events; each event's data is this schema" : "Success",
          content: { [route.stream === "sse" ? "text/event-stream" : "application/json"]: { schema: jsonSchema(route.response, "output") } },
        },
        ...errorResponses(route),
      },
    };
  }
  return {
    openapi: "3.1.0",
    info,
    jsonSchemaDialect: "https://json-schema.org/draft/2020-12/schema",
    paths,
    components: {
      schemas: { Error: jsonSchema(ErrorBodySchema, "output") },
      securitySchemes: { bearerAuth: { type: "http", scheme: "bearer", description: "API key of a configured identity" } },
    },
  };
}
