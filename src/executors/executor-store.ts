import type { NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { Kvm, type KV } from "@nats-io/kv";
import { isKeyExists } from "../config/config-store.js";
import { openBucket } from "../kv/buckets.js";
import { EXECUTORS_BUCKET } from "../streams/names.js";
import type { Binding } from "../config/schemas.js";
import { ToolgateError, type ErrorDetail } from "../errors/toolgate-error.js";
import { ExecutorSchema, type Executor, type RegisterExecutor } from "./schemas.js";

const encoder = new TextEncoder();

export interface BindingReader {
  getBinding(bindingId: string): Promise<Binding | null>;
}

/** The same registration, whatever the order of its keys and bindings and the times it was made. */
function sameRegistration(a: Executor, b: Executor): boolean {
  const sameSet = (x: readonly string[] = [], y: readonly string[] = []) => x.length === y.length && x.every((v) => y.includes(v));
  return a.scope === b.scope && a.description === b.description && sameSet(a.nkeys, b.nkeys) && sameSet(a.bindings, b.bindings);
}

/**
 * The executor registry: KV `tg_executors`, one JSON value per executor id. Unlike the configuration
 * objects an executor changes (key rotation, removal), so every update is a compare-and-set on the
 * entry's revision and the bucket keeps a short history for audit.
 */
export class ExecutorStore {
  /**
   * The last registration read of each executor and its revision. Every read still asks the bucket (a
   * change must reach the next claim on every replica), but an unchanged revision is not decoded and
   * validated again: at every claim, it is the same registration.
   */
  private readonly decoded = new Map<string, { revision: number; executor: Executor }>();

  private constructor(
    private readonly kv: KV,
    private readonly bindings: BindingReader,
  ) {}

  /** Reads are direct gets where safe: the gateway reads an executor at every heartbeat and claim. */
  static async open(nc: NatsConnection, bindings: BindingReader): Promise<ExecutorStore> {
    return new ExecutorStore(await openBucket(new Kvm(nc), await jetstreamManager(nc), EXECUTORS_BUCKET), bindings);
  }

  /**
   * Registers an executor. Idempotent: the same registration again (scope, keys, bindings and
   * description alike) answers the stored one, so an executor may register itself at every start.
   */
  async register(input: RegisterExecutor, now = new Date()): Promise<Executor> {
    await this.checkBindings(input.scope, input.bindings ?? []);
    await this.checkKeysUnused(input.nkeys, input.executor_id);
    const at = now.toISOString();
    const executor = ExecutorSchema.parse({ ...input, created_at: at, updated_at: at });
    try {
      await this.kv.create(input.executor_id, encoder.encode(JSON.stringify(executor)));
    } catch (err) {
      if (!isKeyExists(err)) throw err;
      const stored = await this.get(input.executor_id);
      if (stored && sameRegistration(stored, executor)) return stored;
      throw new ToolgateError(
        "executor_exists",
        `executor '${input.executor_id}' is already registered otherwise: change its keys with PUT /v1/executors/${input.executor_id}/nkeys, its bindings with PUT /v1/executors/${input.executor_id}/bindings`,
      );
    }
    return executor;
  }

  /** Replaces the accepted public keys (a rotation: add the new key, switch the executor, drop the old). */
  async setNkeys(executorId: string, keys: string[], now = new Date()): Promise<Executor> {
    await this.checkKeysUnused(keys, executorId);
    return this.update(executorId, (cur) => ({ ...cur, nkeys: keys }), now);
  }

  /** Replaces the bindings it may claim; a claim on a binding taken away is refused from its next claim on. */
  async setBindings(executorId: string, bindings: string[], now = new Date()): Promise<Executor> {
    const current = await this.get(executorId);
    if (!current) throw this.notFound(executorId);
    await this.checkBindings(current.scope, bindings);
    return this.update(executorId, (cur) => ({ ...cur, bindings }), now);
  }

  /** Removes the registration; returns what it was (the caller detaches the executor's work in flight). */
  async remove(executorId: string): Promise<Executor> {
    const executor = await this.get(executorId);
    if (!executor) throw this.notFound(executorId);
    await this.kv.delete(executorId);
    return executor;
  }

  async get(executorId: string): Promise<Executor | null> {
    const entry = await this.kv.get(executorId);
    if (!entry || entry.operation !== "PUT") {
      this.decoded.delete(executorId);
      return null;
    }
    const known = this.decoded.get(executorId);
    if (known?.revision === entry.revision) return known.executor;
    const executor = ExecutorSchema.parse(entry.json());
    this.decoded.set(executorId, { revision: entry.revision, executor });
    return executor;
  }

  async list(): Promise<Executor[]> {
    const ids: string[] = [];
    for await (const key of await this.kv.keys()) ids.push(key);
    const all = await Promise.all(ids.sort().map((id) => this.get(id)));
    return all.filter((e): e is Executor => e !== null);
  }

  /** A compare-and-set on the entry's revision, read again when another writer won. */
  private async update(executorId: string, change: (current: Executor) => Executor, now: Date): Promise<Executor> {
    for (;;) {
      const entry = await this.kv.get(executorId);
      if (!entry || entry.operation !== "PUT") throw this.notFound(executorId);
      const next = ExecutorSchema.parse({ ...change(ExecutorSchema.parse(entry.json())), updated_at: now.toISOString() });
      try {
        await this.kv.update(executorId, encoder.encode(JSON.stringify(next)), entry.revision);
        return next;
      } catch (err) {
        if (!isKeyExists(err)) throw err;
      }
    }
  }

  private notFound(executorId: string): ToolgateError {
    return new ToolgateError("executor_not_found", `executor '${executorId}' is not registered`);
  }

  private async checkBindings(scope: string, bindingIds: string[]): Promise<void> {
    const details: ErrorDetail[] = [];
    for (const [i, id] of bindingIds.entries()) {
      const binding = await this.bindings.getBinding(id);
      if (!binding)
        details.push({
          path: `bindings[${i}]`,
          code: "unknown_binding",
          message: `binding '${id}' is not registered: register it with POST /v1/bindings first`,
        });
      else if (binding.executor_scope !== scope)
        details.push({
          path: `bindings[${i}]`,
          code: "binding_out_of_scope",
          message: `binding '${id}' belongs to scope '${binding.executor_scope}', not '${scope}'`,
        });
    }
    if (details.length > 0) throw ToolgateError.validation(details);
  }

  /** One key, one identity: nats-server refuses a config that lists an nkey twice, and so do we, earlier. */
  private async checkKeysUnused(keys: string[], executorId: string): Promise<void> {
    const details: ErrorDetail[] = [];
    for (const other of await this.list()) {
      if (other.executor_id === executorId) continue;
      keys.forEach((key, i) => {
        if (other.nkeys.includes(key))
          details.push({
            path: `nkeys[${i}]`,
            code: "nkey_in_use",
            message: `this nkey already belongs to executor '${other.executor_id}': generate a key per executor`,
          });
      });
    }
    if (details.length > 0) throw ToolgateError.validation(details);
  }
}
