import { setTimeout as delay } from "node:timers/promises";
import type { NatsConnection } from "@nats-io/transport-node";
import { PubHeaders, type JetStreamClient, type JsMsg } from "@nats-io/jetstream";
import type { Logger } from "../../log/logger.js";
import type { ExecutionMetrics } from "../../metrics/metrics.js";
import { decode, encode, MalformedMessageError } from "../../wire/codec.js";
import { ReceiptMessage, type Receipt, type ReceiptAnswer } from "../../wire/messages.js";
import { isSubjectToken, subjects } from "../../wire/subjects.js";
import type { ReceiptInput, ReceiptProcessor } from "./receipt-processor.js";
import { LONGEST_TOGETHER, storedFirstOnSubject, togetherShape } from "../../wire/receipt-chains.js";
import { StreamWorker } from "../transport/stream-worker.js";
import { sentAfter, takesJointAnswers } from "../../wire/receipt-order.js";
import { ownReceiptNamed } from "../../wire/receipt-ids.js";
import { RECEIPT_CONSUMER, STREAMS } from "../../streams/names.js";

/**
 * How long after its first look a receipt whose named one is not applied yet looks again, in
 * process, before it is held back: another replica is usually applying that one right then (a
 * claim's receipts sent back to back are handed to the replicas in turn).
 */
export const LOOK_AGAIN_MS: readonly number[] = [1, 2, 4, 8];
/** How long a receipt sent after one not applied yet waits before it is delivered again. */
const HOLD_MS = 25;
/** Deliveries after which a receipt is applied even though the one it names is not (that one is lost, or its own delivery failed): ~0.5 s, well inside the executor's answer timeout, and leaving most of `StreamWorker`'s attempts to transient failures. */
const MAX_DELIVERIES_HELD = 20;

/**
 * Pulls receipts from the shared durable consumer and answers each executor on `tg.ans.<scope>.<executor>`
 * (the executor token of the receipt's subject).
 * A message that is not a receipt is terminated with its reason (it stays in the stream, and never
 * blocks the ones after it); a transient failure is nak'ed and redelivered, which is harmless
 * because processing is idempotent.
 *
 * A claim's receipts are kept in the order they were sent: this process takes one assignment's
 * receipts one at a time, in the order the stream delivers them; one sent ahead of an answer names
 * the receipt before it (`Tg-After`, `src/wire/receipt-order.ts`) and, when another replica has not
 * applied that one yet, looks again for ~15 ms, then is delivered again a moment later instead of
 * being answered (at most `MAX_DELIVERIES_HELD` times: a receipt named but refused, or never
 * stored, holds nothing up for long). A chain (a read's first receipts in one message) is one turn:
 * see `handleChain`.
 */
export class ReceiptConsumer {
  private readonly worker: StreamWorker;
  /** Per assignment, the end of the work on its receipts taken so far. */
  private readonly inOrder = new Map<string, Promise<void>>();
  /** Per assignment, the receipts taken whose turn has not come yet, in order. */
  private readonly waiting = new Map<string, Turn[]>();

  constructor(
    private readonly nc: NatsConnection,
    js: JetStreamClient,
    private readonly processor: ReceiptProcessor,
    private readonly log: Logger,
    private readonly metrics: ExecutionMetrics,
    concurrency = 64,
    private readonly lookAgainMs: readonly number[] = LOOK_AGAIN_MS,
  ) {
    this.worker = new StreamWorker(js, { stream: STREAMS.receipts, durable: RECEIPT_CONSUMER }, (msg) => this.handle(msg), log, concurrency);
  }

  start(): Promise<void> {
    return this.worker.start();
  }

  /** Stops pulling and waits for the receipts being processed (unacknowledged ones are redelivered anyway). */
  stop(): Promise<void> {
    return this.worker.stop();
  }

  /** Takes `msg` after the receipts of its assignment taken before it (by the assignment token of its subject). */
  private handle(msg: JsMsg): Promise<void> {
    const sender = senderOf(msg.subject);
    const key = sender?.assignmentId ?? "";
    const turn: Turn = { msg, sender, taken: false };
    const queue = this.waiting.get(key);
    if (queue) queue.push(turn);
    else this.waiting.set(key, [turn]);
    const take = () => {
      const left = this.waiting.get(key);
      left?.shift();
      if (left?.length === 0) this.waiting.delete(key);
      // Applied (and answered) together with the progress report before it.
      return turn.taken ? Promise.resolve() : this.handleInOrder(turn, key);
    };
    const before = this.inOrder.get(key);
    const handled = before ? before.then(take) : take();
    const settled = handled.then(
      () => undefined,
      () => undefined,
    );
    this.inOrder.set(key, settled);
    void settled.then(() => {
      if (this.inOrder.get(key) === settled) this.inOrder.delete(key);
    });
    return handled;
  }

  private async handleInOrder(turn: Turn, key: string): Promise<void> {
    const { msg, sender } = turn;
    if (!sender) return this.poison(msg, `unexpected subject ${msg.subject}`);
    const { scope, executorId, assignmentId } = sender;
    const receipt = receiptOf(turn);
    if (receipt instanceof MalformedMessageError) return this.poison(msg, receipt.reason);
    if (Array.isArray(receipt)) return this.handleChain(msg, sender, receipt);
    const after = sentAfter(msg.headers);
    // Only a report of the sender's own claim is waited for, and a read's `accepted` (a read may run
    // before it is answered): a receipt naming anything else is taken at once (and judged as it comes).
    const named = after !== undefined && msg.info.deliveryCount < MAX_DELIVERIES_HELD ? ownReceiptNamed(after, receipt) : undefined;
    const held = named === "progress" || (named === "accepted" && (await this.processor.isRead(assignmentId)));
    if (held && !(await this.hadItsTurn(assignmentId, after!))) {
      // Not answered: the executor waits, and the receipt comes back once the one before it had its turn.
      msg.nak(HOLD_MS);
      return;
    }
    const input = inputOf(msg, sender, receipt);
    const leads = receipt.kind === "progress" || (receipt.kind === "accepted" && (await this.processor.isRead(assignmentId)));
    const together = leads ? await this.processedWithFollowers(input, key) : null;
    if (together) return this.answered(msg, receipt, together);
    const answer = await this.processor.process(input);
    // To the subject's executor, the one NATS let publish there: a receipt naming another executor never reaches that one.
    this.nc.publish(subjects.answers(scope, executorId), encode(answer));
    this.answered(msg, receipt, answer);
  }

  /** A chain (a read's first receipts in one message): `ReceiptProcessor.processChain`, one answer message for all. */
  private async handleChain(msg: JsMsg, sender: Sender, receipts: Receipt[]): Promise<void> {
    const answers = await this.processor.processChain(receipts.map((receipt) => inputOf(msg, sender, receipt)));
    this.nc.publish(subjects.answers(sender.scope, sender.executorId), encode(answers));
    for (const [i, receipt] of receipts.entries()) this.counted(msg, receipt, answers[i]!);
    msg.ack();
  }

  /**
   * Applies `input` together with the receipts sent right behind it, when they are already here,
   * waiting for their turn (`ReceiptProcessor.processTogether`: a progress report and the final
   * receipt, or a read's `accepted` and what the read sent behind it): one compare-and-set for all,
   * and one answer message for those whose executor takes joint answers.
   * The first one's answer when they were applied (the followers are then answered and
   * acknowledged, and skipped when their turn comes), else null.
   */
  private async processedWithFollowers(input: ReceiptInput, key: string): Promise<ReceiptAnswer | null> {
    // Receipts delivered together reach `handle` one by one: let the ones already received arrive.
    await new Promise((resolve) => setImmediate(resolve));
    const followers: { turn: Turn; input: ReceiptInput }[] = [];
    let named = input.receipt.receipt_id;
    for (const turn of this.waiting.get(key) ?? []) {
      if (followers.length === LONGEST_TOGETHER - 1 || !turn.sender || sentAfter(turn.msg.headers) !== named) break;
      const receipt = receiptOf(turn);
      if (receipt instanceof MalformedMessageError || Array.isArray(receipt)) break; // taken in its own turn
      followers.push({ turn, input: inputOf(turn.msg, turn.sender, receipt) });
      named = receipt.receipt_id;
    }
    const chain = [input, ...followers.map((f) => f.input)];
    // The longest chain that may be applied together (a report whose final receipt is not a settling one waits its turn).
    while (chain.length >= 2 && !togetherShape(chain.map((i) => i.receipt.kind))) chain.pop();
    if (chain.length < 2) return null;
    const answers = await this.processor.processTogether(chain);
    if (!answers) return null;
    const taken = followers.slice(0, chain.length - 1);
    // Acknowledged before their answers go: applied is applied, and an answer lost is asked for again (`tg.rq`).
    for (const [i, { turn, input: follower }] of taken.entries()) {
      turn.taken = true;
      this.answered(turn.msg, follower.receipt, answers[i + 1]!);
    }
    // A receipt that asks for it (`Tg-Answers: joint`) is answered in the message of the one it names.
    const to = subjects.answers(input.scope, input.subjectExecutorId);
    const send = (group: ReceiptAnswer[]) => this.nc.publish(to, encode(group.length === 1 ? group[0] : group));
    let group = [answers[0]!];
    for (const [i, { turn }] of taken.entries()) {
      if (takesJointAnswers(turn.msg.headers)) group.push(answers[i + 1]!);
      else {
        send(group);
        group = [answers[i + 1]!];
      }
    }
    send(group);
    return answers[0]!;
  }

  /** Counts and logs `receipt`'s answer, and acknowledges its message. */
  private answered(msg: JsMsg, receipt: Receipt, answer: ReceiptAnswer): void {
    this.counted(msg, receipt, answer);
    msg.ack();
  }

  /** Counts and logs the answer to `receipt`, taken from `msg`. */
  private counted(msg: JsMsg, receipt: Receipt, answer: ReceiptAnswer): void {
    if (answer.status !== "pending") this.metrics.receiptProcessed(answer.status, receipt.kind);
    if (answer.status === "rejected" && answer.code) this.metrics.requestRefused("rcpt", answer.code);
    // The audit of a refusal: this line, and the message itself, kept in the stream at `seq`.
    if (answer.status === "rejected")
      this.log.warn(
        {
          seq: msg.seq,
          receipt_id: receipt.receipt_id,
          assignment_id: receipt.assignment_id,
          executor_id: receipt.executor_id,
          kind: receipt.kind,
          code: answer.code,
          reason: answer.reason,
        },
        "receipt rejected",
      );
  }

  /** Whether the receipt `after` names had its turn, looking again a few times within ~15 ms. */
  private async hadItsTurn(assignmentId: string, after: string): Promise<boolean> {
    for (const wait of [0, ...this.lookAgainMs]) {
      if (wait > 0) await delay(wait);
      if (await this.processor.applied(assignmentId, after)) return true;
    }
    return this.processor.indexed(after);
  }

  private poison(msg: JsMsg, reason: string): void {
    this.log.warn({ seq: msg.seq, subject: msg.subject, reason }, "malformed receipt message terminated");
    this.metrics.receiptProcessed("rejected", "unknown");
    // No reason on the wire: nats-server 2.9 takes only a bare `+TERM`; `+TERM <reason>` is silently
    // ignored, so the message stays pending and enough of them stall the consumer (max_ack_pending).
    msg.term();
  }
}

/** The scope, executor and assignment tokens of a receipt's subject (`tg.rcpt.<scope>.<executor>.<assignment>`). */
interface Sender {
  readonly scope: string;
  readonly executorId: string;
  readonly assignmentId: string;
}

/**
 * A receipt taken off the stream, waiting for its assignment's earlier receipts: its sender (null
 * for a subject of another shape), and `taken` once applied with the one before it.
 */
interface Turn {
  readonly msg: JsMsg;
  readonly sender: Sender | null;
  taken: boolean;
  /** Its receipt (or chain) once decoded, or why it is none: a follower looked at by the report before it is not decoded again in its own turn. */
  receipt?: ReceiptMessage | MalformedMessageError;
}

/** The turn's receipt (or chain), decoded once. */
function receiptOf(turn: Turn): ReceiptMessage | MalformedMessageError {
  if (turn.receipt === undefined) {
    try {
      turn.receipt = decode(ReceiptMessage, turn.msg.data);
    } catch (err) {
      if (!(err instanceof MalformedMessageError)) throw err;
      turn.receipt = err;
    }
  }
  return turn.receipt;
}

/** The sender a receipt's subject names, or null for any other subject. */
function senderOf(subject: string): Sender | null {
  const [, , scope, executorId, assignmentId, extra] = subject.split(".");
  if (scope === undefined || executorId === undefined || assignmentId === undefined || extra !== undefined) return null;
  return [scope, executorId, assignmentId].every(isSubjectToken) ? { scope, executorId, assignmentId } : null;
}

function inputOf(msg: JsMsg, sender: Sender, receipt: Receipt): ReceiptInput {
  return {
    scope: sender.scope,
    subjectExecutorId: sender.executorId,
    subjectAssignmentId: sender.assignmentId,
    receipt,
    streamSeq: msg.seq,
    msgId: msg.headers?.get(PubHeaders.MsgIdHdr) || undefined,
    firstOnSubject: storedFirstOnSubject(msg.headers),
    redelivered: msg.redelivered,
  };
}
