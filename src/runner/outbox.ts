import { Receipt, type Grant, type ReceiptAnswer } from "../wire/messages.js";
import { errorText, type Logger } from "./logger.js";
import { receiptBodyDigest } from "../wire/digest.js";
import { RequestRefusedError, type NatsLink } from "./nats-link.js";
import { wireReceipt } from "./receipts.js";
import { LONGEST_TOGETHER, chainShape } from "../wire/receipt-chains.js";
import type { OutboxReceipt, PhaseChange, ReceiptBody, RunnerStore, StoredAnswer } from "./store.js";
import { sleep } from "./wait.js";

/** How long a lingering receipt waits on, past its linger, for a save of its claim to end (see `linger`). */
const SAVE_WAIT_MAX_MS = 250;

export interface OutboxTiming {
  /** How long to wait for the gateway's answer before asking `tg.rq` and resending. */
  answerTimeoutMs: number;
  /** Resends back off (doubling) up to this interval. */
  maxResendIntervalMs: number;
  /** How long a progress report sent ahead waits for a receipt to go out with (see `linger`). */
  progressLingerMs: number;
  /** How long a read's `accepted` waits for the read's outcome to go out with (see `linger`). */
  acceptedLingerMs: number;
}

/** Called with the definitive answer to a receipt; must record it in the store before resolving. */
export type AnswerHandler = (receipt: OutboxReceipt, answer: StoredAnswer) => Promise<void>;

/** One claim's receipts waiting for their answers, in save order, and the drain sending them. */
interface Lane {
  queue: OutboxReceipt[];
  /** A drain is sending the queue; cleared by the drain itself, in the step that finds the queue empty. */
  draining: boolean;
  /** The last drain started (`flush` waits for it). */
  done: Promise<void> | undefined;
  /** Receipts of the queue sent ahead of the answer to the one before them, with their deliveries. */
  ahead: Map<OutboxReceipt, Promise<ReceiptAnswer | undefined>>;
  /** The head waits to go out with what follows it (`linger`): nothing is sent ahead of it meanwhile. */
  lingering: boolean;
  /** Ends the head's wait when what was queued behind it is enough, or at once (`now`). */
  wake: ((now?: boolean) => void) | undefined;
}

/**
 * Delivers saved receipts. Receipts are always in the store before they reach this class; it sends
 * them one claim at a time, in the order they were saved, each only after the previous one was
 * answered: the gateway then sees progress 1 before 2 and every progress before the final receipt,
 * whichever gateway replica happens to process them. Under a grant whose gateway keeps receipts
 * sent ahead in order (`sendAheadFor`), a claim's progress and final receipts go out as soon as they
 * are saved instead, each naming the one sent before it (`Tg-After`), and their answers are taken in
 * the same order; only progress reports are overtaken (see `sendAhead`).
 *
 * A receipt is resent, with the same id and body, until the gateway answers: after
 * `answerTimeoutMs` without an answer the outbox asks `tg.rq` (the answer may have been lost), then
 * resends with `replayed: true`, backing off up to `maxResendIntervalMs`.
 */
export class Outbox {
  private readonly lanes = new Map<string, Lane>();
  /** Receipt id -> its lane waiting for the answer (undefined: stop waiting). */
  private readonly waiters = new Map<string, (answer: ReceiptAnswer | undefined) => void>();
  /** Per claim (lane key), how many of its receipts are being saved: a lingering report waits for them. */
  private readonly saving = new Map<string, number>();
  /** Receipts saved by an earlier process of this executor: their first send here is a replay. */
  private readonly replays = new Set<string>();
  /** Grants whose gateway said it keeps receipts sent ahead of their answers in order (a claim reply's `Tg-Receipt-Order`). */
  private readonly ahead = new WeakSet<Grant>();
  /** Grants whose gateway said it takes a read's first receipts as one message (a claim reply's `Tg-Receipt-Chains`). */
  private readonly chains = new WeakSet<Grant>();
  private readonly stop = new AbortController();

  constructor(
    private readonly store: RunnerStore,
    private readonly link: NatsLink,
    private readonly timing: OutboxTiming,
    private readonly logger: Logger,
    private readonly onAnswered: AnswerHandler,
  ) {}

  /**
   * Sends what the store holds unanswered of a claim found at start-up: with `replayed: true`, as an
   * earlier process may have sent it. Each is checked against the wire schema first (the file is
   * outside the process); one that fails stops the claim's lane there, since what follows it must
   * not overtake it.
   */
  resume(grant: Grant, saved: readonly OutboxReceipt[]): void {
    const unanswered: OutboxReceipt[] = [];
    for (const receipt of saved) {
      if (receipt.answer) continue;
      let body: ReceiptBody;
      try {
        // Its transport fields off again: the body in the schema's key order, whatever order the store kept.
        const { claim_token: _token, replayed: _replayed, ...parsed } = Receipt.parse(wireReceipt(receipt, grant.claim_token, false));
        body = parsed;
      } catch (err) {
        this.logger.error(
          { err: errorText(err), receipt_id: receipt.receiptId },
          "a saved receipt is not a valid receipt; it and the claim's later receipts are not sent",
        );
        break;
      }
      this.replays.add(receipt.receiptId);
      unanswered.push({ ...receipt, body });
    }
    this.send(grant, unanswered);
  }

  /**
   * Saves a receipt (with the phase change that goes with it), then sends it. `behind`: a receipt
   * queued while its claim was still being saved is sent once that settles (the claim's first
   * receipt is then in the lane ahead of it); it rejects when the claim was not saved.
   */
  async append(grant: Grant, receipt: OutboxReceipt, change?: PhaseChange, behind?: Promise<void>): Promise<void> {
    const key = laneKey(grant);
    this.saving.set(key, (this.saving.get(key) ?? 0) + 1);
    try {
      await this.store.appendReceipt(receipt, change);
      await behind;
    } finally {
      const left = this.saving.get(key)! - 1;
      if (left > 0) this.saving.set(key, left);
      else this.saving.delete(key);
      // A report lingering for this one stops waiting: it goes out now (below), or was not saved.
      this.lanes.get(key)?.wake?.();
    }
    this.send(grant, [receipt]);
  }

  /**
   * Sends receipts already saved (built by `buildReceipt`, so valid), after the claim's earlier
   * ones. The lane keeps them in memory: the store is written before a receipt reaches it, and read
   * only at start-up.
   */
  send(grant: Grant, saved: readonly OutboxReceipt[]): void {
    const key = laneKey(grant);
    let lane = this.lanes.get(key);
    if (!lane) this.lanes.set(key, (lane = { queue: [], draining: false, done: undefined, ahead: new Map(), lingering: false, wake: undefined }));
    lane.queue.push(...saved);
    if (saved.length > 0) lane.wake?.();
    if (!lane.draining && lane.queue.length > 0) {
      lane.draining = true;
      // Sends the head at once (a drain runs up to its first wait), before anything is sent behind it.
      lane.done = this.drain(key, grant, lane);
    }
    if (this.ahead.has(grant)) this.sendAhead(grant, lane);
  }

  /** Sends the head of `grant`'s lane now if it lingers (a read's `accepted` whose handler will send no outcome before its answer). */
  sendLingering(grant: Grant): void {
    const lane = this.lanes.get(laneKey(grant));
    if (lane?.lingering) lane.wake?.(true);
  }

  /** Lets the receipts of `grant` go out ahead of the answers before them (its gateway keeps them in order). */
  sendAheadFor(grant: Grant): void {
    this.ahead.add(grant);
  }

  /** Lets a read's first receipts under `grant` go out as one message (its gateway takes chains). */
  sendChainsFor(grant: Grant): void {
    this.chains.add(grant);
  }

  /**
   * Sends every queued receipt not sent yet that follows a progress report, naming that report, or
   * a read's `accepted`, naming it. Nothing else is overtaken: a write's `accepted`'s answer is what
   * allows side effects, and a submission's is what a task's outcome builds on. A report right
   * behind a read's `accepted` with nothing queued after it waits for what follows (the outcome,
   * usually: the gateway applies a report and the final receipt behind it in one write), or for the
   * answer to `accepted`.
   */
  private sendAhead(grant: Grant, lane: Lane): void {
    if (lane.lingering) return;
    for (let i = 1; i < lane.queue.length; i++) {
      const receipt = lane.queue[i]!;
      const before = lane.queue[i - 1]!;
      const behindRead = before.kind === "accepted" && grant.tool_kind === "read";
      if (before.kind !== "progress" && !behindRead) return;
      if (behindRead && receipt.kind === "progress" && i === lane.queue.length - 1) return;
      if (!lane.ahead.has(receipt)) lane.ahead.set(receipt, this.deliver(grant, receipt, before.receiptId));
    }
  }

  /** Routes an answer that arrived on `tg.ans.<scope>.<executor>` to the receipt waiting for it. */
  handleAnswer(answer: ReceiptAnswer): void {
    const waiter = this.waiters.get(answer.receipt_id);
    if (waiter) waiter(answer);
    else this.logger.debug({ receipt_id: answer.receipt_id, status: answer.status }, "answer for a receipt not awaited");
  }

  /** Resolves when every lane is idle, or after `timeoutMs`, whichever is first. */
  async flush(timeoutMs: number): Promise<void> {
    const lanes = Promise.all([...this.lanes.values()].flatMap((l) => (l.draining && l.done ? [l.done] : [])));
    await Promise.race([lanes, sleep(timeoutMs, this.stop.signal)]);
  }

  /** Stops sending; unanswered receipts stay in the store for the next start. */
  close(): void {
    this.stop.abort();
    for (const lane of this.lanes.values()) lane.wake?.();
    for (const done of [...this.waiters.values()]) done(undefined);
  }

  private async drain(key: string, grant: Grant, lane: Lane): Promise<void> {
    try {
      for (let next = lane.queue[0]; next; next = lane.queue[0]) {
        if (this.stop.signal.aborted) return;
        let delivery = lane.ahead.get(next);
        if (!delivery) {
          const wait = lane.queue.length === 1 ? this.lingerOf(grant, next) : undefined;
          if (wait) await this.linger(key, lane, wait);
          delivery = this.sendChain(grant, lane) ?? this.deliver(grant, next);
          // What was queued behind it meanwhile goes right after it, in the same turn of the event loop.
          lane.lingering = false;
          if (this.ahead.has(grant)) this.sendAhead(grant, lane);
        }
        const answer = await delivery;
        if (!answer) return; // closing
        const { status, code, reason } = answer;
        await this.onAnswered(next, {
          status: status as StoredAnswer["status"],
          answeredAt: Date.now(),
          ...(code ? { code } : {}),
          ...(reason ? { reason } : {}),
        });
        lane.queue.shift();
        lane.ahead.delete(next);
      }
    } catch (err) {
      // The receipt stays unanswered in the store and at the head of the lane: the next send or start-up tries it again.
      if (!this.stop.signal.aborted) this.logger.error({ err, assignment_id: grant.assignment_id }, "outbox lane stopped");
    } finally {
      // In the very step that found the queue empty (or stopped): a receipt saved after it, even in
      // the same turn of the event loop, finds the lane idle and starts a drain of its own. Cleared
      // any later (once this promise settled), it would wait in the queue for the claim's next send,
      // and a claim's last receipt has none.
      lane.draining = false;
      if (lane.queue.length === 0 && this.lanes.get(key) === lane) this.lanes.delete(key);
    }
  }

  /**
   * Sends the head of the lane with the receipts queued right behind it as one message (a chain: a
   * read's `accepted` and what the read did behind it, `src/wire/receipt-chains.ts`) when its gateway
   * takes chains; returns the head's delivery, the others' are set in `lane.ahead`. Undefined, and
   * nothing sent, when the lane holds no chain: only first sends travel in one (a replay goes alone,
   * as it may have gone before), and only a claim of the assignment's first generation, on whose
   * receipt subject this executor cannot have published before (the stream stores a chain only as
   * the subject's first message).
   */
  private sendChain(grant: Grant, lane: Lane): Promise<ReceiptAnswer | undefined> | undefined {
    if (!this.chains.has(grant) || grant.tool_kind !== "read" || grant.generation !== 0) return undefined;
    const chain = lane.queue.slice(0, LONGEST_TOGETHER);
    while (chain.length >= 2 && !chainShape(chain.map((r) => r.kind))) chain.pop();
    if (chain.length < 2 || chain.some((r) => this.replays.has(r.receiptId) || lane.ahead.has(r))) return undefined;
    // Each waits for its answer before the chain leaves: the answers come in one message.
    const [head, ...rest] = chain.map((r, i) => this.deliver(grant, r, i === 0 ? undefined : chain[i - 1]!.receiptId, true));
    for (const [i, delivery] of rest.entries()) lane.ahead.set(chain[i + 1]!, delivery);
    try {
      this.link.postChain(chain.map((r) => wireReceipt(r, grant.claim_token, false)));
    } catch (err) {
      // As a lone first send that fails: each delivery asks `tg.rq` once its answer is overdue, then resends alone.
      this.logger.warn({ err: errorText(err), assignment_id: grant.assignment_id }, "receipt chain publish failed; will resend its receipts alone");
    }
    return head;
  }

  /**
   * How long `head`, alone in its lane, waits for what follows it (see `linger`), under a gateway
   * that keeps receipts sent ahead in order; undefined: it goes at once.
   * - A progress report waits for any receipt: a gateway applies a report and the final receipt that
   *   came with it in one compare-and-set, and answers both at once.
   * - A read's `accepted` waits for the read's outcome (a report alone behind it is not enough): a
   *   gateway applies a read's `accepted` with the receipts sent behind it in one compare-and-set.
   *   The read runs meanwhile; nothing it does waits for the answer to `accepted`. Like a report it
   *   waits on past its time while a receipt of the claim is being saved: an outcome that is
   *   already being written leaves with it (one stored write instead of two) rather than right
   *   behind it (up to 250 ms past its time: see `linger`).
   */
  private lingerOf(grant: Grant, head: OutboxReceipt): Linger | undefined {
    if (!this.ahead.has(grant)) return undefined;
    if (head.kind === "progress") return { ms: this.timing.progressLingerMs, enough: () => true };
    if (head.kind === "accepted" && grant.tool_kind === "read")
      return { ms: this.timing.acceptedLingerMs, enough: ({ queue }) => queue.length > 1 && queue.at(-1)?.kind !== "progress" };
    return undefined;
  }

  /**
   * Waits for receipts to be queued behind the lane's head, so that they leave together: until
   * `wait.enough` says what was queued is enough, for `wait.ms`, and on while a receipt of the claim
   * is being saved (the final one, usually: its fsync can take longer), up to `SAVE_WAIT_MAX_MS`
   * more: a save slower than that is a stalled disk, which the head does not wait out.
   */
  private linger(key: string, lane: Lane, wait: Linger): Promise<void> {
    if (wait.ms === 0) return Promise.resolve();
    lane.lingering = true;
    return new Promise((resolve) => {
      let expired = false;
      let timer = setTimeout(() => {
        expired = true;
        if (!this.saving.has(key) || this.stop.signal.aborted) lane.wake?.();
        else timer = setTimeout(() => lane.wake?.(true), SAVE_WAIT_MAX_MS);
      }, wait.ms);
      lane.wake = (now = false) => {
        if (!now && !expired && !this.stop.signal.aborted && !wait.enough(lane)) return;
        clearTimeout(timer);
        lane.wake = undefined;
        resolve();
      };
    });
  }

  /**
   * Sends one receipt (`after` the one named, when sent ahead) until it has a definitive answer;
   * undefined when the outbox closes first. `inChain`: its first send is a chain's, which the caller
   * publishes (a receipt of a chain the gateway did not apply whole is answered `pending`, and then
   * sent alone).
   */
  private async deliver(grant: Grant, receipt: OutboxReceipt, after?: string, inChain = false): Promise<ReceiptAnswer | undefined> {
    let interval = this.timing.answerTimeoutMs;
    for (let attempt = 0; !this.stop.signal.aborted; attempt++) {
      const replayed = attempt > 0 || this.replays.has(receipt.receiptId);
      const answered = this.awaitAnswer(receipt.receiptId, interval);
      let answer: ReceiptAnswer | undefined;
      try {
        // A first send asks no PubAck: the gateway's answer confirms it, and no earlier copy can have
        // made the stream drop it. A resend asks for one: a copy the stream de-duplicated is never
        // delivered to a gateway, so then the stored answer is asked for.
        if (!replayed) {
          if (!inChain) this.link.postReceipt(wireReceipt(receipt, grant.claim_token, false), after);
        } else if ((await this.link.publishReceipt(wireReceipt(receipt, grant.claim_token, true), after)).duplicate) answer = await this.query(grant, receipt);
      } catch (err) {
        this.logger.warn({ err: errorText(err), receipt_id: receipt.receiptId, attempt }, "receipt publish failed; will resend");
      }
      if (answer === undefined || answer.status === "pending") answer = (await answered.promise) ?? (await this.query(grant, receipt));
      else answered.cancel();
      if (answer?.status === "duplicate") answer = await this.original(grant, receipt, answer);
      if (answer && answer.status !== "pending") {
        this.replays.delete(receipt.receiptId);
        return answer;
      }
      interval = Math.min(interval * 2, this.timing.maxResendIntervalMs);
    }
    return undefined;
  }

  /**
   * A `duplicate` says the gateway already holds this receipt, not how it took it the first time.
   * For a final or progress receipt that is enough (it is acknowledged). For `accepted` it is not:
   * only a recorded `accepted` allows side effects, so the first status is asked for (`tg.rq`).
   */
  private async original(grant: Grant, receipt: OutboxReceipt, duplicate: ReceiptAnswer): Promise<ReceiptAnswer | undefined> {
    const first = await this.query(grant, receipt);
    if (first && first.status !== "pending" && first.status !== "duplicate") return first;
    return receipt.kind === "accepted" ? undefined : duplicate;
  }

  /** The stored answer; the body's digest makes the gateway tell a receipt stored with another body (`receipt_conflict`). */
  private async query(grant: Grant, receipt: OutboxReceipt): Promise<ReceiptAnswer | undefined> {
    try {
      const body_digest = receiptBodyDigest(wireReceipt(receipt, grant.claim_token, false));
      return await this.link.queryReceipt({
        receipt_id: receipt.receiptId,
        assignment_id: receipt.assignmentId,
        executor_id: grant.executor_id,
        kind: receipt.kind,
        body_digest,
      });
    } catch (err) {
      if (err instanceof RequestRefusedError)
        this.logger.error({ err: errorText(err), receipt_id: receipt.receiptId }, "receipt query refused by the gateway: a bug in this executor");
      else this.logger.debug({ err: errorText(err), receipt_id: receipt.receiptId }, "receipt query unanswered");
      return undefined;
    }
  }

  private awaitAnswer(receiptId: string, timeoutMs: number): { promise: Promise<ReceiptAnswer | undefined>; cancel(): void } {
    let done!: (answer: ReceiptAnswer | undefined) => void;
    // `close` ends the wait through `waiters`: no abort listener per receipt on the shared signal.
    const promise = new Promise<ReceiptAnswer | undefined>((resolve) => {
      const timer = setTimeout(() => done(undefined), timeoutMs);
      done = (answer) => {
        clearTimeout(timer);
        if (this.waiters.get(receiptId) === done) this.waiters.delete(receiptId);
        resolve(answer);
      };
      this.waiters.set(receiptId, done);
    });
    return { promise, cancel: () => done(undefined) };
  }
}

/** How long a lane's head waits for what follows it, and what is enough to stop waiting. */
interface Linger {
  ms: number;
  enough: (lane: Lane) => boolean;
}

/** One claim's lane: its receipts, in save order. */
function laneKey(grant: Grant): string {
  return `${grant.assignment_id}/${grant.generation}`;
}
