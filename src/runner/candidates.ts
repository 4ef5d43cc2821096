import type { Candidate, Grant, RefusalCode } from "../wire/messages.js";
import type { ReceiptTerms } from "../wire/receipt-chains.js";
import { errorText, type Logger } from "./logger.js";
import type { CandidateDelivery, NatsLink } from "./nats-link.js";
import type { Presence } from "./presence.js";
import type { RegisteredTool } from "./claim-execution.js";
import { sleep, type Notifier } from "./wait.js";

/**
 * Refusals that say this executor may not claim now at all (offline, or not as registered): it stops
 * pulling until a heartbeat is answered `ok` again, and the candidate goes back for another executor.
 */
const STOP_PULLING_REFUSALS: ReadonlySet<RefusalCode> = new Set([
  "executor_offline",
  "executor_unknown",
  "out_of_scope",
  "identity_mismatch",
  "binding_not_granted",
]);

/** A claim refusal worth another try later (the candidate goes back to the scope). */
const RETRYABLE_CLAIM_REFUSALS: ReadonlySet<RefusalCode> = new Set([...STOP_PULLING_REFUSALS, "too_many_claims"]);

export interface CandidateSource {
  readonly link: NatsLink;
  readonly logger: Logger;
  readonly executorId: string;
  readonly presence: Presence;
  /** Woken whenever a slot frees or pulling may resume. */
  readonly changed: Notifier;
  readonly timing: { pullExpiresMs: number; releaseDelayMs: number };
  /** Claims held at once, claim requests in flight included. */
  readonly maxConcurrent: number;
  /** Whether the runner pulls now (running). */
  pulls(): boolean;
  /** Whether it takes new work now (ready). */
  ready(): boolean;
  /** Claims held now. */
  held(): number;
  /** The tool this executor serves the candidate with, or undefined when it is not for this executor now. */
  toolFor(candidate: Candidate): RegisteredTool | undefined;
  /** Takes a claim the gateway granted (vet, accept, run). */
  /** `terms`: what the claim's gateway takes of the claim's receipts. */
  take(grant: Grant, candidate: Candidate, tool: RegisteredTool, terms: ReceiptTerms): Promise<void>;
}

/**
 * Pulling and claiming: candidates are pulled from the scope's shared durable consumer while there
 * are free slots, each is claimed, and a grant is handed to the runner. One consumer serves the whole
 * scope, so a candidate of a binding or tool this executor does not serve goes back to it.
 */
export class CandidatePuller {
  private claiming = 0;

  constructor(private readonly source: CandidateSource) {}

  /** Claim requests in flight. */
  get inFlight(): number {
    return this.claiming;
  }

  /** Pulls while the runner pulls; a failed pull is retried after `pullExpiresMs`. */
  async loop(stop: AbortSignal): Promise<void> {
    const { source } = this;
    while (source.pulls()) {
      const free = source.maxConcurrent - source.held() - this.claiming;
      if (!source.presence.isOnline || !source.ready() || free <= 0) {
        await source.changed.wait(source.presence.interval);
        continue;
      }
      try {
        for await (const delivery of source.link.pull(free, source.timing.pullExpiresMs)) void this.claim(delivery);
      } catch (err) {
        if (!source.pulls()) return;
        source.logger.warn({ err: errorText(err) }, "candidate pull failed; retrying");
        await sleep(source.timing.pullExpiresMs, stop);
      }
    }
  }

  private async claim(delivery: CandidateDelivery): Promise<void> {
    const { source } = this;
    const { candidate } = delivery;
    const tool = source.toolFor(candidate);
    if (!tool) {
      delivery.release(source.timing.releaseDelayMs);
      return;
    }
    this.claiming++;
    try {
      const { reply, terms } = await source.link.claim({
        assignment_id: candidate.assignment_id,
        executor_id: source.executorId,
        generation: candidate.generation,
      });
      if (reply.status === "refused") {
        const registry = STOP_PULLING_REFUSALS.has(reply.code) && reply.code !== "executor_offline";
        source.logger[registry ? "warn" : "debug"]({ assignment_id: candidate.assignment_id, code: reply.code, reason: reply.reason }, "claim refused");
        if (STOP_PULLING_REFUSALS.has(reply.code)) source.presence.setOnline(false);
        if (RETRYABLE_CLAIM_REFUSALS.has(reply.code)) delivery.release(source.timing.releaseDelayMs);
        else delivery.ack();
        return;
      }
      try {
        await source.take(reply.grant, candidate, tool, terms);
      } finally {
        // Acknowledged once the claim is saved and its first receipt queued (its ack wait is far
        // longer): the acknowledgement then leaves in the same socket write as that receipt, not in
        // one of its own ahead of the store's commit.
        delivery.ack();
      }
    } catch (err) {
      source.logger.warn({ err: errorText(err), assignment_id: candidate.assignment_id }, "claim failed; candidate released");
      delivery.release(source.timing.releaseDelayMs);
    } finally {
      this.claiming--;
      source.changed.notify();
    }
  }
}
