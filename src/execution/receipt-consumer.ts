import type { NatsConnection } from "@nats-io/transport-node";
import type { ConsumerMessages, JetStreamClient, JsMsg } from "@nats-io/jetstream";
import type { Logger } from "../log/logger.js";
import { decode, encode, MalformedMessageError } from "../wire/codec.js";
import { Receipt } from "../wire/messages.js";
import { STREAMS, isSubjectToken, subjects } from "../wire/subjects.js";
import type { ReceiptProcessor } from "./receipt-processor.js";

/** The durable consumer every gateway replica shares (declared in `streams/consumer.TG_RECEIPTS.gateway.json`). */
export const RECEIPT_CONSUMER = "gateway";

/** How long a message that failed for a transient reason (NATS timeout...) waits before redelivery. */
const RETRY_DELAY_MS = 1_000;
/** A message failing this often is not failing transiently: terminate it (logged) rather than loop forever. */
const MAX_ATTEMPTS = 50;

/**
 * Pulls receipts from the shared durable consumer and answers each executor on `tg.ans.<scope>.<executor>`
 * (the executor token of the receipt's subject).
 * A message that is not a receipt is terminated with its reason (it stays in the stream, and never
 * blocks the ones after it); a transient failure is nak'ed and redelivered, which is harmless
 * because processing is idempotent.
 */
export class ReceiptConsumer {
  private messages?: ConsumerMessages;
  private loop?: Promise<void>;
  private readonly inFlight = new Set<Promise<void>>();

  constructor(
    private readonly nc: NatsConnection,
    private readonly js: JetStreamClient,
    private readonly processor: ReceiptProcessor,
    private readonly log: Logger,
    private readonly concurrency = 64,
  ) {}

  async start(): Promise<void> {
    const consumer = await this.js.consumers.get(STREAMS.receipts, RECEIPT_CONSUMER);
    this.messages = await consumer.consume({ max_messages: this.concurrency * 2 });
    this.loop = this.run(this.messages);
  }

  /** Stops pulling and waits for the receipts being processed (unacknowledged ones are redelivered anyway). */
  async stop(): Promise<void> {
    await this.messages?.close();
    await this.loop;
    await Promise.allSettled([...this.inFlight]);
  }

  private async run(messages: ConsumerMessages): Promise<void> {
    for await (const msg of messages) {
      while (this.inFlight.size >= this.concurrency) await Promise.race(this.inFlight);
      const task = this.handle(msg).finally(() => this.inFlight.delete(task));
      this.inFlight.add(task);
    }
  }

  private async handle(msg: JsMsg): Promise<void> {
    const [, , scope, executorId, assignmentId, extra] = msg.subject.split(".");
    if (scope === undefined || executorId === undefined || assignmentId === undefined || extra !== undefined || ![scope, executorId, assignmentId].every(isSubjectToken))
      return this.poison(msg, `unexpected subject ${msg.subject}`);
    let receipt: Receipt;
    try {
      receipt = decode(Receipt, msg.data);
    } catch (err) {
      if (err instanceof MalformedMessageError) return this.poison(msg, err.reason);
      throw err;
    }
    try {
      const answer = await this.processor.process({ scope, subjectExecutorId: executorId, subjectAssignmentId: assignmentId, receipt, streamSeq: msg.seq });
      // To the subject's executor, the one NATS let publish there: a receipt naming another executor never reaches that one.
      this.nc.publish(subjects.answers(scope, executorId), encode(answer));
      // The audit of a refusal: this line, and the message itself, kept in the stream at `seq`.
      if (answer.status === "rejected")
        this.log.warn({ seq: msg.seq, receipt_id: receipt.receipt_id, assignment_id: receipt.assignment_id, executor_id: receipt.executor_id, kind: receipt.kind, code: answer.code, reason: answer.reason }, "receipt rejected");
      msg.ack();
    } catch (err) {
      if (msg.info.deliveryCount >= MAX_ATTEMPTS) {
        this.log.error({ err, seq: msg.seq, receipt_id: receipt.receipt_id }, "receipt processing kept failing; terminated");
        return msg.term(); // bare: see poison()
      }
      this.log.error({ err, seq: msg.seq, receipt_id: receipt.receipt_id }, "receipt processing failed; redelivering");
      msg.nak(RETRY_DELAY_MS);
    }
  }

  private poison(msg: JsMsg, reason: string): void {
    this.log.warn({ seq: msg.seq, subject: msg.subject, reason }, "malformed receipt message terminated");
    // No reason on the wire: nats-server 2.9 takes only a bare `+TERM`; `+TERM <reason>` is silently
    // ignored, so the message stays pending and enough of them stall the consumer (max_ack_pending).
    msg.term();
  }
}
