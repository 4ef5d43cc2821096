import { z } from "zod";
import { ToolgateError } from "../errors/toolgate-error.js";
import type { DetachedClaims } from "../wire/messages.js";
import { defineRoute, type RouteDef } from "../http/route.js";
import type { ExecutorStore } from "./executor-store.js";
import { ExecutorIdSchema, ExecutorSchema, RegisterExecutorSchema, RotateExecutorKeysSchema, SetExecutorBindingsSchema } from "./schemas.js";

/** What removing an executor does to its work in flight: the operator detach's result. */
export interface ExecutorDetach {
  detach(scope: string, executorId: string): Promise<DetachedClaims>;
}

const params = z.object({ executor_id: ExecutorIdSchema });

/**
 * The executor registry API. Claims and heartbeats are admitted by each gateway's view of the
 * registry, so a change holds from the next one on this replica and on the others once their watch
 * delivered it (milliseconds); what NATS admits changes only once the server config is regenerated
 * (`toolgate nats-config`) and reloaded: docs/security.md.
 */
export function executorRoutes(store: ExecutorStore, detach: ExecutorDetach): RouteDef[] {
  return [
    defineRoute({
      id: "registerExecutor",
      method: "POST",
      path: "/v1/executors",
      summary:
        "Register an executor: its scope, the public nkey(s) it connects to NATS with, the bindings it may claim; the same registration again answers the stored one",
      tags: ["executors"],
      permissions: ["configuration:write"],
      errors: ["executor_exists"],
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
      errors: [],
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
      errors: ["executor_not_found"],
      params,
      response: ExecutorSchema,
      handler: async ({ params }) => {
        const executor = await store.read(params.executor_id);
        if (!executor) throw new ToolgateError("executor_not_found", `executor '${params.executor_id}' is not registered`);
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
      errors: ["executor_not_found"],
      params,
      body: RotateExecutorKeysSchema,
      response: ExecutorSchema,
      handler: ({ params, body }) => store.setNkeys(params.executor_id, body.nkeys),
    }),
    defineRoute({
      id: "setExecutorBindings",
      method: "PUT",
      path: "/v1/executors/{executor_id}/bindings",
      summary: "Replace the bindings the executor may claim; a binding taken away is refused from its next claim on",
      tags: ["executors"],
      permissions: ["configuration:write"],
      errors: ["executor_not_found"],
      params,
      body: SetExecutorBindingsSchema,
      response: ExecutorSchema,
      handler: ({ params, body }) => store.setBindings(params.executor_id, body.bindings),
    }),
    defineRoute({
      id: "removeExecutor",
      method: "DELETE",
      path: "/v1/executors/{executor_id}",
      summary:
        "Remove an executor: its claims and heartbeats are refused at once and its work in flight is detached; NATS refuses it once the server config is regenerated and reloaded",
      tags: ["executors"],
      permissions: ["configuration:write"],
      errors: ["executor_not_found"],
      params,
      response: z.object({
        removed: z.literal(true),
        released: z.array(z.string()),
        reconciliation_required: z.array(z.string()),
        retried: z.array(z.string()),
      }),
      handler: async ({ params }) => {
        // Removed first: this replica refuses its claims from now on, the others once their view has the removal (milliseconds), so
        // nothing new reaches it while its holdings move. A claim admitted meanwhile (as one that read the registry just before always
        // could be), or its work should this process die before the detach, is left to the sweeper: an unconfirmed claim expires
        // with its lease, confirmed work is detached once its presence lapses (its heartbeats are refused).
        const removed = await store.remove(params.executor_id);
        return { removed: true as const, ...(await detach.detach(removed.scope, removed.executor_id)) };
      },
    }),
  ];
}
