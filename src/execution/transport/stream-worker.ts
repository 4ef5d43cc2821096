import type { ConsumerMessages, JetStreamClient, JsMsg } from "@nats-io/jetstream";
import type { Logger } from "../../log/logger.js";

/** How long a message that failed for a transient reason (NATS timeout...) waits before redelivery. */
const RETRY_DELAY_MS = 1_000;
/** A message failing this often is not failing transiently: terminate it (logged) rather than loop forever. */
const MAX_ATTEMPTS = 50;

/**
 * Works through a durable consumer shared by every gateway replica, a bounded number of messages at
 * a time. The handler acknowledges (or terminates) what it is done with; when it throws, the message
 * is nak'ed and redelivered, which handlers make harmless by being idempotent.
 */
export class StreamWorker {
  private messages?: ConsumerMessages;
  private loop?: Promise<void>;
  private readonly inFlight = new Set<Promise<void>>();

  constructor(
    private readonly js: JetStreamClient,
    private readonly source: { stream: string; durable: string },
    private readonly handle: (msg: JsMsg) => Promise<void>,
    private readonly log: Logger,
    private readonly concurrency: number,
  ) {}

  async start(): Promise<void> {
    const consumer = await this.js.consumers.get(this.source.stream, this.source.durable);
    this.messages = await consumer.consume({ max_messages: this.concurrency * 2 });
    this.loop = this.run(this.messages);
  }

  /** Stops pulling and waits for the messages being handled (unacknowledged ones are redelivered anyway). */
  async stop(): Promise<void> {
    await this.messages?.close();
    await this.loop;
    await Promise.allSettled([...this.inFlight]);
  }

  private async run(messages: ConsumerMessages): Promise<void> {
    for await (const msg of messages) {
      while (this.inFlight.size >= this.concurrency) await Promise.race(this.inFlight);
      const task = this.attempt(msg).finally(() => this.inFlight.delete(task));
      this.inFlight.add(task);
    }
  }

  private async attempt(msg: JsMsg): Promise<void> {
    try {
      await this.handle(msg);
    } catch (err) {
      const where = { err, stream: this.source.stream, seq: msg.seq, subject: msg.subject };
      if (msg.info.deliveryCount >= MAX_ATTEMPTS) {
        this.log.error(where, "message kept failing; terminated");
        return msg.term();
      }
      this.log.error(where, "message handling failed; redelivering");
      msg.nak(RETRY_DELAY_MS);
    }
  }
}
