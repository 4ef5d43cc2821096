import { DeliverPolicy, type JetStreamClient } from "@nats-io/jetstream";
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
 * report, without waiting (they are notifications, the records are the truth): one connection keeps
 * them in order, a failed publish is logged. A reader follows one run from any sequence on with an
 * ordered consumer (no gaps, no duplicates) that is deleted as soon as the reader stops.
 */
export class RunEventLog {
  constructor(
    private readonly js: JetStreamClient,
    private readonly log: Logger,
  ) {}

  publish(event: RunEvent): void {
    this.js.publish(subjects.runEvents(event.run_id), encode(event)).catch((err: unknown) => this.log.warn({ err, run_id: event.run_id, type: event.type }, "run event not stored"));
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
