import { z } from "zod";
import { ApiError } from "../http/errors.js";
import { defineRoute, type RouteDef } from "../http/route.js";
import type { ExecutorStore } from "./executor-store.js";
import { ExecutorIdSchema, ExecutorSchema, RegisterExecutorSchema, RotateExecutorKeysSchema } from "./schemas.js";

const params = z.object({ executor_id: ExecutorIdSchema });

/**
 * The executor registry API. Registering or rotating changes what NATS admits only once the server
 * config is regenerated (`toolgate nats-config`) and reloaded: docs/security.md.
 */
export function executorRoutes(store: ExecutorStore): RouteDef[] {
  return [
    defineRoute({
      id: "registerExecutor",
      method: "POST",
      path: "/v1/executors",
      summary: "Register an executor: its scope, the public nkey(s) it connects to NATS with, its bindings",
      tags: ["executors"],
      permissions: ["configuration:write"],
      body: RegisterExecutorSchema,
      response: ExecutorSchema,
      status: 201,
      handler: ({ body }) => store.register(body),
    }),
    defineRoute({
      id: "listExecutors",
      method: "GET",
      path: "/v1/executors",
      summary: "List registered executors",
      tags: ["executors"],
      permissions: ["configuration:read"],
      response: z.object({ executors: z.array(ExecutorSchema) }),
      handler: async () => ({ executors: await store.list() }),
    }),
    defineRoute({
      id: "getExecutor",
      method: "GET",
      path: "/v1/executors/{executor_id}",
      summary: "Read one registered executor",
      tags: ["executors"],
      permissions: ["configuration:read"],
      params,
      response: ExecutorSchema,
      handler: async ({ params }) => {
        const executor = await store.get(params.executor_id);
        if (!executor) throw ApiError.notFound("executor_not_found", `executor '${params.executor_id}' is not registered`);
        return executor;
      },
    }),
    defineRoute({
      id: "rotateExecutorKeys",
      method: "PUT",
      path: "/v1/executors/{executor_id}/nkeys",
      summary: "Replace the executor's accepted public nkeys (rotation: add the new one, switch, drop the old)",
      tags: ["executors"],
      permissions: ["configuration:write"],
      params,
      body: RotateExecutorKeysSchema,
      response: ExecutorSchema,
      handler: ({ params, body }) => store.setNkeys(params.executor_id, body.nkeys),
    }),
    defineRoute({
      id: "removeExecutor",
      method: "DELETE",
      path: "/v1/executors/{executor_id}",
      summary: "Remove an executor; NATS refuses it once the server config is regenerated and reloaded",
      tags: ["executors"],
      permissions: ["configuration:write"],
      params,
      response: z.object({ removed: z.literal(true) }),
      handler: async ({ params }) => {
        await store.remove(params.executor_id);
        return { removed: true as const };
      },
    }),
  ];
}
