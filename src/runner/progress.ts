import type { Grant } from "../wire/messages.js";
import type { Outbox } from "./outbox.js";
import { buildReceipt } from "./receipts.js";

/**
 * Of a read started while its claim was being saved: its reports are queued behind the claim and
 * resolve at once (a read has no side effects, so nothing it does next waits on a save). Owned by
 * the claim's execution, which sends its outcome behind `last` too.
 */
export interface AheadOfClaim {
  /**
   * Settles once the claim's last receipt queued so far is in its outbox lane (or could not be
   * saved): the next one is sent after it. First the claim's own first receipt, which rejects when
   * the claim was not saved.
   */
  last: Promise<void>;
  /** A report that could not be saved (its claim was not either, or the store failed). */
  unsaved(err: unknown): void;
}

/**
 * `ctx.progress` of one handler run: numbers progress receipts on from `nextSeq` in call order and saves
 * them one after the other, so the outbox (which sends in save order) keeps that order too.
 * - Usually a report resolves once saved, and the next one is saved after it.
 * - A read started ahead of its claim's save (`ahead`) has each report queued in the store at once,
 *   in call order, and resolved then: what it saves (its outcome too) goes into the claim's own
 *   transaction when it comes in the same turn of the event loop, one commit instead of one each.
 */
export class ProgressReporter {
  private chain: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(
    private readonly grant: Grant,
    private readonly outbox: Outbox,
    /** The next seq: 1 on a first run, past the saved ones after a restart (`nextProgressSeq`). */
    private nextSeq: number,
    private readonly ahead?: AheadOfClaim,
  ) {}

  report(data: unknown): Promise<void> {
    if (this.closed) return Promise.reject(new Error(`assignment ${this.grant.assignment_id} is already reported: progress after the outcome is not sent`));
    // Built (and validated) synchronously: an unrepresentable value throws in the caller's hands.
    const receipt = buildReceipt(this.grant, { kind: "progress", seq: this.nextSeq++, progress: data }, Date.now());
    if (this.ahead) {
      // Queued now (the store keeps call order) and sent behind the claim's last receipt: a later
      // durability may hold that one back (a second report waits for its fsync, an outcome saved
      // ahead of the confirmation does not). A failure is told, not thrown at the handler (nor at
      // the next report, whose own save fails when the claim's did).
      this.ahead.last = this.outbox.append(this.grant, receipt, undefined, this.ahead.last).catch(this.ahead.unsaved);
      return Promise.resolve();
    }
    const saved = this.chain.then(() => this.outbox.append(this.grant, receipt));
    this.chain = saved.catch(() => undefined);
    return saved;
  }

  /** No more progress; resolves once every accepted `report` is saved (queued, for a read ahead of its claim). */
  async close(): Promise<void> {
    this.closed = true;
    await this.chain;
  }
}
