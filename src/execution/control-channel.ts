import type { JetStreamClient } from "@nats-io/jetstream";
import { encode } from "../wire/codec.js";
import type { ExecutorControl } from "../wire/messages.js";
import { subjects } from "../wire/subjects.js";

/**
 * Control messages to one executor. They are stored in `TG_CONTROL` before the operation answers, so
 * an executor that is offline or reconnecting at that moment reads them when it comes back (the
 * runner follows its subject from its oldest open assignment on); a live executor gets them at once.
 */
export class ControlChannel {
  constructor(private readonly js: JetStreamClient) {}

  /** `msgID` de-duplicates a repeat of the same operation (an idempotent retry) inside the stream's window. */
  async tell(scope: string, executorId: string, message: ExecutorControl, msgID?: string): Promise<void> {
    await this.js.publish(subjects.executorControl(scope, executorId), encode(message), msgID ? { msgID } : {});
  }
}
