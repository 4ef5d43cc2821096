import type { Binding } from "../config/schemas.js";
import type { PresenceHeartbeat, PresenceReply } from "../wire/messages.js";
import type { CandidateQueue } from "./candidate-queue.js";
import type { PresenceRecord } from "./records.js";
import type { VersionedStore } from "./versioned-store.js";

export interface BindingLookup {
  getBinding(bindingId: string): Promise<Binding | null>;
}

/**
 * Executor presence: a heartbeat writes `<scope>.<executor>` into a KV bucket whose max age is the
 * presence TTL (nats-server 2.9 has no per-key TTL, so the bucket-wide max age expires an entry that
 * stops being refreshed). An executor is online while its entry is live and says `online`.
 */
export class PresenceService {
  constructor(
    private readonly store: VersionedStore<PresenceRecord>,
    private readonly bindings: BindingLookup,
    private readonly candidates: CandidateQueue,
    /** The bucket's max age: an entry older than this is treated as gone even before the server prunes it. */
    readonly ttlMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  async heartbeat(scope: string, beat: PresenceHeartbeat): Promise<PresenceReply> {
    const refuse = (reason: string): PresenceReply => ({ status: "refused", ttl_ms: this.ttlMs, reason });
    if (beat.scope !== scope) return refuse(`heartbeat for scope '${beat.scope}' sent on the subject of scope '${scope}'`);
    for (const bindingId of beat.bindings) {
      const binding = await this.bindings.getBinding(bindingId);
      if (!binding) return refuse(`binding '${bindingId}' is not registered`);
      if (binding.executor_scope !== scope) return refuse(`binding '${bindingId}' belongs to scope '${binding.executor_scope}', not '${scope}'`);
    }
    // The scope's executors pull from its durable consumer: make sure it exists before they try.
    await this.candidates.ensureScopeConsumer(scope);
    const record: PresenceRecord = { ...beat, seen_at: this.now() };
    await this.store.put(presenceKey(scope, beat.executor_id), record);
    return { status: "ok", ttl_ms: this.ttlMs };
  }

  /** The executor's live presence, or null when it is offline (never seen, expired, or detaching). */
  async online(scope: string, executorId: string): Promise<PresenceRecord | null> {
    const entry = await this.store.get(presenceKey(scope, executorId));
    return entry && isOnline(entry.value, this.ttlMs, this.now()) ? entry.value : null;
  }
}

/** Online: says so, and its last heartbeat is younger than the TTL (the server may not have pruned it yet). */
export function isOnline(record: PresenceRecord, ttlMs: number, now: number): boolean {
  return record.status === "online" && now - record.seen_at < ttlMs;
}

function presenceKey(scope: string, executorId: string): string {
  return `${scope}.${executorId}`;
}
