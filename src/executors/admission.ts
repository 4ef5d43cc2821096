import type { RefusalCode } from "../wire/messages.js";
import type { Executor } from "./schemas.js";

/** Who sent a request, as far as the gateway can tell: its subject's tokens and, under the generated NATS authorization, its connection's nkey. */
export interface RequestOrigin {
  /** The scope and executor tokens of its subject, which NATS permissions bind to the sender's nkey. */
  readonly scope: string;
  readonly executorId: string;
  /** The nkey nats-server says the request came from (unset on a server without the generated authorization). */
  readonly nkey?: string;
}

export interface RegistryReader {
  /** The registration as the caller's view of the registry has it (no request to NATS). */
  get(executorId: string): Promise<Executor | null>;
  /** The registration as the registry has it now. */
  read(executorId: string): Promise<Executor | null>;
}

export interface AdmissionRefusal {
  code: Extract<RefusalCode, "executor_unknown" | "out_of_scope" | "binding_not_granted" | "identity_mismatch">;
  reason: string;
}

/**
 * The executor registry as the authority over what an executor may do: a claim or a heartbeat is
 * admitted only for an executor the registry knows (`executor_unknown`), in its registered scope
 * (`out_of_scope`), from a connection of one of its registered nkeys when it has any
 * (`identity_mismatch`), for bindings it is granted (`binding_not_granted`). What a heartbeat
 * declares never widens this: it is proof of life only.
 *
 * Callers read the registry at every request from their gateway's view of it (`ExecutorStore.get`,
 * kept current by a KV watch): a change made through this gateway reaches its next claim at once,
 * and the other replicas' within the watch's delivery (milliseconds). A claim racing a change was
 * possible before (one that read the registry just before the change), so the window only widens by
 * that delivery; the history checker judges claims against every kept registry revision. A refusal
 * is confirmed on the registry itself (`confirmedRefusal`): a registration or grant made through
 * another replica is never refused for not having reached the view yet.
 */
export function admissionRefusal(executor: Executor | null, origin: RequestOrigin, bindingIds: readonly string[]): AdmissionRefusal | null {
  if (!executor) return { code: "executor_unknown", reason: `executor '${origin.executorId}' is not registered: register it with POST /v1/executors` };
  if (executor.scope !== origin.scope)
    return { code: "out_of_scope", reason: `executor '${executor.executor_id}' is registered in scope '${executor.scope}', not '${origin.scope}'` };
  // A registered nkey is the executor's identity: a request from any other connection is not its own.
  if (executor.nkeys.length > 0 && (origin.nkey === undefined || !executor.nkeys.includes(origin.nkey)))
    return {
      code: "identity_mismatch",
      reason: `the request did not come from a NATS connection of one of executor '${executor.executor_id}''s registered nkeys`,
    };
  const granted = executor.bindings ?? [];
  const missing = bindingIds.filter((id) => !granted.includes(id));
  if (missing.length > 0)
    return {
      code: "binding_not_granted",
      reason: `the registry does not grant executor '${executor.executor_id}' binding(s) ${missing.map((id) => `'${id}'`).join(", ")}`,
    };
  return null;
}

/** `admissionRefusal` by `viewed`, the caller's view of the registration, confirmed on the registry as it is now when it refuses. */
export async function confirmedRefusal(
  registry: RegistryReader,
  viewed: Executor | null,
  origin: RequestOrigin,
  bindingIds: readonly string[],
): Promise<AdmissionRefusal | null> {
  if (!admissionRefusal(viewed, origin, bindingIds)) return null;
  return admissionRefusal(await registry.read(origin.executorId), origin, bindingIds);
}
