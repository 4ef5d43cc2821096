import { DeliverPolicy, type JetStreamClient } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "../../log/logger.js";
import { STORED_MAX_JSON_DEPTH } from "../../validation/json-depth.js";
import { decode, encode } from "../../wire/codec.js";
import { itemsOf } from "../../wire/primitives.js";
import { subjects } from "../../wire/subjects.js";
import type { StoreLayout } from "../model/store-layout.js";
import { RunEventMessage, type RunEvent } from "./run-events.js";
import { STREAMS } from "../../streams/names.js";

/**
 * One stored event and where a reader resumes to read every event after it (the SSE event id): the
 * sequence in `TG_EVENTS` of its message when it is the message's last event (`last`), else the
 * sequence of the message before (a message holds the events of one write; resuming after that
 * sequence delivers the whole message again, this event first).
 */
export interface StoredRunEvent {
  seq: number;
  event: RunEvent;
  last: boolean;
}

/**
 * The run event stream `TG_EVENTS` (`tg.evt.<run>`). Events are published after the write they
 * report, as plain NATS messages the stream stores (they are notifications, the records are the
 * truth): no PubAck is asked for, which saves the server an acknowledgement and the gateway an
 * inbox message per event. Under store layout 5 the events of one write are one message (a
 * progress report applied with the final receipt: one message, not two); earlier layouts publish one
 * per event. One connection keeps them in order, and while it reconnects the client buffers them. A
 * reader follows one run from any sequence on with an ordered consumer (no gaps, no duplicates) that
 * is deleted as soon as the reader stops.
 */
export class RunEventLog {
  constructor(
    private readonly nc: NatsConnection,
    private readonly js: JetStreamClient,
    private readonly log: Logger,
    private readonly layout: StoreLayout,
  ) {}

  /** Publishes the events of one write (all of one run), in their order. */
  publish(events: readonly RunEvent[]): void {
    const [first] = events;
    if (!first) return;
    try {
      const subject = subjects.runEvents(first.run_id);
      if (events.length > 1 && this.layout >= 5) this.nc.publish(subject, encode(events));
      else for (const event of events) this.nc.publish(subject, encode(event));
    } catch (err) {
      // Only a closed connection throws here: the gateway is stopping.
      this.log.warn({ err, run_id: first.run_id, types: events.map((e) => e.type) }, "run events not published");
    }
  }

  /**
   * The events of `runId` published from now on, handed to `onEvent` as they arrive (`onEvent(null,
   * err)` once if the subscription fails): a plain subscription, so no consumer is made and nothing
   * is replayed. It is made at once, so a record read after this call misses no event published
   * after that read. A reconnect can lose some: a caller confirms what matters on the records.
   */
  subscribe(runId: string, onEvent: (event: RunEvent | null, err?: Error) => void): { unsubscribe(): void } {
    return this.nc.subscribe(subjects.runEvents(runId), {
      callback: (err, m) => {
        if (err) return onEvent(null, err);
        let message: RunEventMessage;
        try {
          message = decode(RunEventMessage, m.data, STORED_MAX_JSON_DEPTH);
        } catch (decodeErr) {
          return this.log.warn({ err: decodeErr, run_id: runId }, "undecodable run event skipped");
        }
        for (const event of itemsOf(message)) onEvent(event);
      },
    });
  }

  /** The events of `runId` after sequence `after`, until `signal` aborts (see `StoredRunEvent` for their `seq`). */
  async *follow(runId: string, after: number, signal: AbortSignal): AsyncGenerator<StoredRunEvent> {
    const consumer = await this.js.consumers.get(STREAMS.events, {
      filter_subjects: subjects.runEvents(runId),
      ...(after > 0 ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: after + 1 } : { deliver_policy: DeliverPolicy.All }),
    });
    const messages = await consumer.consume();
    const stop = () => void messages.close();
    signal.addEventListener("abort", stop, { once: true });
    try {
      if (signal.aborted) return;
      let previous = after;
      for await (const m of messages) {
        const events = itemsOf(decode(RunEventMessage, m.data, STORED_MAX_JSON_DEPTH));
        for (const [i, event] of events.entries()) {
          const last = i === events.length - 1;
          yield { seq: last ? m.seq : previous, event, last };
        }
        previous = m.seq;
      }
    } finally {
      signal.removeEventListener("abort", stop);
      await messages.close();
      // An ordered consumer outlives its reader by minutes unless deleted: the client is gone, so is it.
      await consumer.delete().catch(() => undefined);
    }
  }
}
