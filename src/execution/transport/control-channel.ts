import { AckPolicy, DeliverPolicy, type JetStreamClient, type JetStreamManager } from "@nats-io/jetstream";
import { nanos } from "@nats-io/transport-node";
import { decode, encode } from "../../wire/codec.js";
import { CONTROL_QUERY_MAX, ExecutorControl, type ControlQueryReply } from "../../wire/messages.js";
import { subjects } from "../../wire/subjects.js";
import { STREAMS } from "../../streams/names.js";

/** A catch-up reader the server drops by itself should this process die before deleting it. */
const READER_INACTIVE_MS = 30_000;
const FETCH_WAIT_MS = 2_000;

/**
 * Control messages to one executor. They are stored in `TG_CONTROL` before the operation answers and
 * reach a connected executor at once (its core subscription). One that was offline or reconnecting
 * asks for what it missed (`tg.ctlq.<scope>`): executors have no JetStream API of their own.
 */
export class ControlChannel {
  constructor(
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
  ) {}

  /** `msgID` de-duplicates a repeat of the same operation (an idempotent retry) inside the stream's window. */
  async tell(scope: string, executorId: string, message: ExecutorControl, msgID?: string): Promise<void> {
    await this.js.publish(subjects.executorControl(scope, executorId), encode(message), msgID ? { msgID } : {});
  }

  /** The messages stored for one executor from `since` on, oldest first (at most `CONTROL_QUERY_MAX`). */
  async since(scope: string, executorId: string, since: number): Promise<ControlQueryReply> {
    const info = await this.jsm.consumers.add(STREAMS.control, {
      filter_subject: subjects.executorControl(scope, executorId),
      deliver_policy: DeliverPolicy.StartTime,
      opt_start_time: new Date(since).toISOString(),
      ack_policy: AckPolicy.None,
      inactive_threshold: nanos(READER_INACTIVE_MS),
    });
    try {
      const pending = info.num_pending;
      if (pending === 0) return { messages: [], more: false };
      const consumer = await this.js.consumers.get(STREAMS.control, info.name);
      const messages: ControlQueryReply["messages"] = [];
      for await (const m of await consumer.fetch({ max_messages: Math.min(pending, CONTROL_QUERY_MAX), expires: FETCH_WAIT_MS })) {
        messages.push({ message: decode(ExecutorControl, m.data), sent_at: Math.floor(m.info.timestampNanos / 1e6) });
        if (m.info.pending === 0 || messages.length === CONTROL_QUERY_MAX) break;
      }
      return { messages, more: pending > messages.length };
    } finally {
      await this.jsm.consumers.delete(STREAMS.control, info.name).catch(() => undefined);
    }
  }
}
