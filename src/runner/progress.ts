import type { Grant } from "../wire/messages.js";
import type { Outbox } from "./outbox.js";
import { buildReceipt } from "./receipts.js";

/**
 * `ctx.progress` of one handler run: numbers progress receipts on from `nextSeq` in call order and saves
 * them one after the other, so the outbox (which sends in save order) keeps that order too.
 */
export class ProgressReporter {
  private chain: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(
    private readonly grant: Grant,
    private readonly outbox: Outbox,
    /** The next seq: 1 on a first run, past the saved ones after a restart (`nextProgressSeq`). */
    private nextSeq: number,
  ) {}

  report(data: unknown): Promise<void> {
    if (this.closed) return Promise.reject(new Error(`assignment ${this.grant.assignment_id} is already reported: progress after the outcome is not sent`));
    // Built (and validated) synchronously: an unrepresentable value throws in the caller's hands.
    const receipt = buildReceipt(this.grant, { kind: "progress", seq: this.nextSeq++, progress: data }, Date.now());
    const saved = this.chain.then(() => this.outbox.append(this.grant, receipt));
    this.chain = saved.catch(() => undefined);
    return saved;
  }

  /** No more progress; resolves once every accepted `report` is saved. */
  async close(): Promise<void> {
    this.closed = true;
    await this.chain;
  }
}
