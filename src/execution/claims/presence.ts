import type { Binding } from "../../config/schemas.js";
import type { PresenceHeartbeat, PresenceReply, RefusalCode } from "../../wire/messages.js";
import type { CandidateQueue } from "../dispatch/candidate-queue.js";
import type { ExecutorDetacher } from "../operations/executor-detach.js";
import type { PresenceRecord } from "../model/records.js";
import type { VersionedStore } from "../../kv/versioned-store.js";
import type { WatchedBucket } from "../../kv/watched-bucket.js";
import { confirmedRefusal, type RegistryReader, type RequestOrigin } from "../../executors/admission.js";

export interface BindingLookup {
  getBinding(bindingId: string): Promise<Binding | null>;
}

/**
 * Executor presence: a heartbeat of an executor the registry admits (`admissionRefusal`; the
 * bindings it declares must all be granted to it) writes `<scope>.<executor>` into a KV bucket whose
 * max age is the presence TTL (nats-server 2.9 has no per-key TTL, so the bucket-wide max age
 * expires an entry that stops being refreshed). An executor is online while its entry is live and says `online`.
 * A `detaching` heartbeat hands its unconfirmed claims back to the candidates (every such heartbeat
 * does, so a claim won in a race with the first one is released by the next).
 *
 * A claim asks `online` of this process's view of the bucket (its own writes in it at once, the other
 * replicas' within the watch's delivery), and of the bucket only when the view says offline; the
 * sweeper (`present`) and the heartbeat's own checks read the bucket.
 */
export class PresenceService {
  constructor(
    private readonly store: VersionedStore<PresenceRecord>,
    private readonly view: WatchedBucket<PresenceRecord>,
    private readonly registry: RegistryReader,
    private readonly bindings: BindingLookup,
    private readonly candidates: CandidateQueue,
    private readonly detacher: ExecutorDetacher,
    /** The bucket's max age: an entry older than this is treated as gone even before the server prunes it. */
    readonly ttlMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  async heartbeat(origin: RequestOrigin, beat: PresenceHeartbeat): Promise<PresenceReply> {
    const { scope } = origin;
    const refuse = (code: RefusalCode, reason: string): PresenceReply => ({ status: "refused", ttl_ms: this.ttlMs, code, reason });
    if (beat.scope !== scope) return refuse("malformed", `heartbeat for scope '${beat.scope}' sent on the subject of scope '${scope}'`);
    const refusal = await confirmedRefusal(this.registry, await this.registry.get(beat.executor_id), origin, beat.bindings);
    if (refusal) return refuse(refusal.code, refusal.reason);
    for (const bindingId of beat.bindings) {
      const binding = await this.bindings.getBinding(bindingId);
      if (!binding) return refuse("not_found", `binding '${bindingId}' is not registered`);
      if (binding.executor_scope !== scope)
        return refuse("out_of_scope", `binding '${bindingId}' belongs to scope '${binding.executor_scope}', not '${scope}'`);
    }
    if ((await this.live(scope, beat.executor_id))?.status === "detached")
      return refuse(
        "executor_detached",
        `executor '${beat.executor_id}' was detached by an operator; it may come back once its presence lapsed (${this.ttlMs} ms without heartbeats)`,
      );
    // The scope's executors pull from its durable consumer: make sure it exists before they try.
    await this.candidates.ensureScopeConsumer(scope);
    await this.write({ ...beat, seen_at: this.now() });
    if (beat.status === "detaching") await this.detacher.detach(scope, beat.executor_id, "release_unconfirmed");
    return { status: "ok", ttl_ms: this.ttlMs };
  }

  /** Records an operator's detach: the executor counts as gone and its heartbeats are refused until the record lapses. */
  async markDetached(scope: string, executorId: string): Promise<void> {
    const known = await this.live(scope, executorId);
    await this.write({
      executor_id: executorId,
      scope,
      bindings: known?.bindings ?? [],
      status: "detached",
      in_flight: 0,
      seen_at: this.now(),
    });
  }

  /** Whether the executor is still there for the work it holds (online or finishing it while detaching). */
  async present(scope: string, executorId: string): Promise<boolean> {
    const status = (await this.live(scope, executorId))?.status;
    return status === "online" || status === "detaching";
  }

  /** The executor's live presence, or null when it is offline (never seen, expired, or detaching). */
  async online(scope: string, executorId: string): Promise<PresenceRecord | null> {
    const viewed = await this.view.get(presenceKey(scope, executorId));
    if (viewed && isOnline(viewed.value, this.ttlMs, this.now())) return viewed.value;
    // Confirmed on the bucket: a heartbeat through another replica may not have reached the view yet.
    const record = await this.live(scope, executorId);
    return record?.status === "online" ? record : null;
  }

  /** The record while it is younger than the TTL (the server prunes it a little later). */
  private async live(scope: string, executorId: string): Promise<PresenceRecord | null> {
    const entry = await this.store.get(presenceKey(scope, executorId));
    return entry && this.now() - entry.value.seen_at < this.ttlMs ? entry.value : null;
  }

  /** Writes the record, in this process's view at once. */
  private async write(record: PresenceRecord): Promise<void> {
    const key = presenceKey(record.scope, record.executor_id);
    this.view.wrote(key, await this.store.put(key, record), record);
  }
}

/** Online: says so, and its last heartbeat is younger than the TTL (the server may not have pruned it yet). */
export function isOnline(record: PresenceRecord, ttlMs: number, now: number): boolean {
  return record.status === "online" && now - record.seen_at < ttlMs;
}

function presenceKey(scope: string, executorId: string): string {
  return `${scope}.${executorId}`;
}
