import type { NatsConnection } from "@nats-io/transport-node";
import { ConfigStore } from "../../src/config/config-store.js";
import { ExecutorStore } from "../../src/executors/executor-store.js";
import type { Executor, RegisterExecutor } from "../../src/executors/schemas.js";

/**
 * Registers an executor in the gateway's executor registry (the authority over claims) through
 * `ExecutorStore`, the code `POST /v1/executors` runs, on a connection that reaches the registry's
 * bucket. Idempotent: the same registration again is fine. Without nkeys it suits a server without
 * the generated authorization.
 */
export async function registerExecutor(nc: NatsConnection, registration: Omit<RegisterExecutor, "nkeys"> & { nkeys?: string[] }): Promise<Executor> {
  const registry = await ExecutorStore.open(nc, await ConfigStore.open(nc));
  return registry.register({ ...registration, nkeys: registration.nkeys ?? [] });
}
