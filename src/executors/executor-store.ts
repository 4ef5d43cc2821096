import type { NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { Kvm, type KV } from "@nats-io/kv";
import { isKeyExists } from "../config/config-store.js";
import { openBucket } from "../kv/buckets.js";
import type { Versioned } from "../kv/versioned-store.js";
import { WatchedBucket } from "../kv/watched-bucket.js";
import { EXECUTORS_BUCKET } from "../streams/names.js";
import type { Binding } from "../config/schemas.js";
import { ToolgateError, type ErrorDetail } from "../errors/toolgate-error.js";
import { ExecutorSchema, type Executor, type RegisterExecutor } from "./schemas.js";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

const decodeExecutor = (data: Uint8Array): Executor => ExecutorSchema.parse(JSON.parse(decoder.decode(data)));

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
 *
 * Claims and heartbeats read it at every request (`get`): from this process's view of the bucket
 * (`watch`), which its own changes reach at once and other replicas' within the watch's delivery.
 * The API and the changes read the bucket itself (`read`, `list`).
 */
export class ExecutorStore {
  private view: WatchedBucket<Executor> | undefined;

  private constructor(
    private readonly nc: NatsConnection,
    private readonly kv: KV,
    private readonly bindings: BindingReader,
  ) {}

  static async open(nc: NatsConnection, bindings: BindingReader): Promise<ExecutorStore> {
    return new ExecutorStore(nc, await openBucket(new Kvm(nc), await jetstreamManager(nc), EXECUTORS_BUCKET), bindings);
  }

  /** Starts the view `get` answers from; resolves once it holds the registry. */
  async watch(): Promise<void> {
    this.view = await WatchedBucket.start(this.nc, this.kv, decodeExecutor);
    await this.view.ready;
  }

  /** Ends the view (a `get` after it throws). */
  stop(): void {
    this.view?.stop();
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
      const revision = await this.kv.create(input.executor_id, encoder.encode(JSON.stringify(executor)));
      this.view?.wrote(input.executor_id, revision, executor);
    } catch (err) {
      if (!isKeyExists(err)) throw err;
      const stored = await this.read(input.executor_id);
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
    const current = await this.read(executorId);
    if (!current) throw this.notFound(executorId);
    await this.checkBindings(current.scope, bindings);
    return this.update(executorId, (cur) => ({ ...cur, bindings }), now);
  }

  /** Removes the registration; returns what it was (the caller detaches the executor's work in flight). */
  async remove(executorId: string): Promise<Executor> {
    const entry = await this.entry(executorId);
    if (!entry) throw this.notFound(executorId);
    await this.kv.delete(executorId);
    this.view?.removed(executorId, entry.revision);
    return entry.value;
  }

  /** The registration as this process's view has it: what claims and heartbeats are admitted by (see `watch`). */
  async get(executorId: string): Promise<Executor | null> {
    if (!this.view) throw new Error("the executor registry's view is not started: call watch() first");
    return (await this.view.get(executorId))?.value ?? null;
  }

  /** The registration as the bucket has it now. */
  async read(executorId: string): Promise<Executor | null> {
    return (await this.entry(executorId))?.value ?? null;
  }

  async list(): Promise<Executor[]> {
    const ids: string[] = [];
    for await (const key of await this.kv.keys()) ids.push(key);
    const all = await Promise.all(ids.sort().map((id) => this.read(id)));
    return all.filter((e): e is Executor => e !== null);
  }

  /** A compare-and-set on the entry's revision, read again when another writer won. */
  private async update(executorId: string, change: (current: Executor) => Executor, now: Date): Promise<Executor> {
    for (;;) {
      const entry = await this.entry(executorId);
      if (!entry) throw this.notFound(executorId);
      const next = ExecutorSchema.parse({ ...change(entry.value), updated_at: now.toISOString() });
      try {
        const revision = await this.kv.update(executorId, encoder.encode(JSON.stringify(next)), entry.revision);
        this.view?.wrote(executorId, revision, next);
        return next;
      } catch (err) {
        if (!isKeyExists(err)) throw err;
      }
    }
  }

  private async entry(executorId: string): Promise<Versioned<Executor> | null> {
    const entry = await this.kv.get(executorId);
    return entry?.operation === "PUT" ? { value: decodeExecutor(entry.value), revision: entry.revision } : null;
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
