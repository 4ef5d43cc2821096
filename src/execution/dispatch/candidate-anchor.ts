import type { Logger } from "../../log/logger.js";
import type { CandidateQueue } from "./candidate-queue.js";

/**
 * How often a gateway that offered candidates since its last anchor stores a new one. nats-server
 * writes a work queue in blocks of 4 MB: at 1,000 candidates a second a block fills in ~15 s, and
 * the block after it empties (and is replaced) until the next renewal.
 */
export const ANCHOR_RENEWAL_MS = 5_000;

/**
 * Keeps one message that no consumer takes (`subjects.candidateAnchor`) in the newest block of the
 * candidates stream. nats-server removes a work queue's block file as soon as its last message is
 * acknowledged, and opens a new one for the next message: with the queue emptied after nearly every
 * candidate (a few calls in flight), that is a file created, a tombstone written and a file removed
 * per call, inside the server's store path. The anchor keeps the block from ever being empty.
 *
 * A block fills and the server starts the next one, which has no anchor: every few seconds a gateway
 * that offered candidates since its last anchor stores a new one and deletes those before it. A
 * failed renewal changes nothing but the server's work; it is logged and tried at the next tick.
 */
export class CandidateAnchor {
  private timer?: NodeJS.Timeout;
  private renewing?: Promise<void>;
  /** `CandidateQueue.offered` when the last anchor was stored (-1: none stored yet). */
  private anchoredAt = -1;

  constructor(
    private readonly candidates: Pick<CandidateQueue, "anchor" | "offered">,
    private readonly log: Logger,
    private readonly renewalMs = ANCHOR_RENEWAL_MS,
  ) {}

  /** Stores the first anchor now, then renews it every `renewalMs` while this process offers candidates. */
  start(): void {
    this.renew();
    this.timer = setInterval(() => this.renew(), this.renewalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.renewing;
  }

  private renew(): void {
    const offered = this.candidates.offered;
    // Nothing offered since the last anchor: the stream has not moved on (another gateway's offers are its own to anchor).
    if (this.renewing || offered === this.anchoredAt) return;
    this.renewing = this.candidates
      .anchor()
      .then(
        () => void (this.anchoredAt = offered),
        (err: unknown) => this.log.warn({ err }, "candidates' anchor not renewed; the server opens a block per emptied queue until the next try"),
      )
      .finally(() => (this.renewing = undefined));
  }
}
