import { DeliverPolicy, type JetStreamClient } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "../../log/logger.js";
import { STORED_MAX_JSON_DEPTH } from "../../validation/json-depth.js";
import { decode, encode } from "../../wire/codec.js";
import { subjects } from "../../wire/subjects.js";
import { RunEvent } from "./run-events.js";
import { STREAMS } from "../../streams/names.js";

/** One stored event and its sequence in `TG_EVENTS` (the SSE event id). */
export interface StoredRunEvent {
  seq: number;
  event: RunEvent;
}

/**
 * The run event stream `TG_EVENTS` (`tg.evt.<run>`). Events are published after the write they
 * report, as plain NATS messages the stream stores (they are notifications, the records are the
 * truth): no PubAck is asked for, which saves the server an acknowledgement and the gateway an
 * inbox message per event, five per tool call. One connection keeps them in order, and while it
 * reconnects the client buffers them. A reader follows one run from any sequence on with an
 * ordered consumer (no gaps, no duplicates) that is deleted as soon as the reader stops.
 */
export class RunEventLog {
  constructor(
    private readonly nc: NatsConnection,
    private readonly js: JetStreamClient,
    private readonly log: Logger,
  ) {}

  publish(event: RunEvent): void {
    try {
      this.nc.publish(subjects.runEvents(event.run_id), encode(event));
    } catch (err) {
      // Only a closed connection throws here: the gateway is stopping.
      this.log.warn({ err, run_id: event.run_id, type: event.type }, "run event not published");
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
        try {
          onEvent(decode(RunEvent, m.data, STORED_MAX_JSON_DEPTH));
        } catch (decodeErr) {
          this.log.warn({ err: decodeErr, run_id: runId }, "undecodable run event skipped");
        }
      },
    });
  }

  /** The events of `runId` after sequence `after`, until `signal` aborts. */
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
      for await (const m of messages) yield { seq: m.seq, event: decode(RunEvent, m.data, STORED_MAX_JSON_DEPTH) };
    } finally {
      signal.removeEventListener("abort", stop);
      await messages.close();
      // An ordered consumer outlives its reader by minutes unless deleted: the client is gone, so is it.
      await consumer.delete().catch(() => undefined);
    }
  }
}
