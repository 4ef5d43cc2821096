import type { ExecutorControl } from "../wire/messages.js";
import { errorText, type Logger } from "./logger.js";
import type { NatsLink } from "./nats-link.js";
import type { TaskStopRequest } from "./tools.js";
import { CancelRequested } from "./tools.js";

/** How far the server's clock (a control message's time) may differ from this process's. */
export const CLOCK_SKEW_MS = 5_000;

export interface ControlTarget {
  readonly link: NatsLink;
  readonly logger: Logger;
  readonly executorId: string;
  /** When this process started: an older `detach_requested` was meant for an earlier one. */
  readonly startedAt: number;
  /** Fires the signal of the handler of a claim held here, if any. */
  abort(assignmentId: string, reason: CancelRequested): void;
  /** Asks the product to stop a submitted task held here, if any. */
  stopTask(assignmentId: string, kind: TaskStopRequest["kind"], reason: string): void;
  detach(): void;
}

/**
 * The gateway's control messages to this executor (`run_cancelled`, `task_cancel_requested`,
 * `detach_requested`), live on `tg.ctl.<scope>.<executor>` and, for what was missed while away or
 * disconnected, from `tg.ctlq`. Applying one twice is harmless (aborting twice, detaching twice).
 */
export class ControlMessages {
  constructor(private readonly target: ControlTarget) {}

  apply(message: ExecutorControl, sentAt: number): void {
    const { target } = this;
    target.logger.info({ control: message }, "control message");
    switch (message.type) {
      case "run_cancelled":
        for (const id of message.assignment_ids) {
          target.abort(id, new CancelRequested("run_cancelled", `run ${message.run_id} was cancelled`));
          target.stopTask(id, "run_cancelled", `run ${message.run_id} was cancelled`);
        }
        return;
      case "task_cancel_requested":
        target.abort(message.assignment_id, new CancelRequested("task_cancel_requested", message.reason));
        target.stopTask(message.assignment_id, "task_cancel_requested", message.reason);
        return;
      case "detach_requested":
        // Addressed to the process that was running then: a restart is a fresh attach, not a replay of it.
        if (message.executor_id === target.executorId && sentAt >= target.startedAt - CLOCK_SKEW_MS) target.detach();
        return;
    }
  }

  /**
   * Applies the control messages stored since `since`. Unanswered, it is logged: the receipt answers
   * still tell a handler its run ended.
   */
  async catchUp(since: number): Promise<void> {
    try {
      for (let from = since, more = true; more;) {
        const reply = await this.target.link.queryControl(from);
        for (const { message, sent_at } of reply.messages) this.apply(message, sent_at);
        more = reply.more && reply.messages.length > 0;
        from = Math.max(from + 1, reply.messages.at(-1)?.sent_at ?? from);
      }
    } catch (err) {
      this.target.logger.warn({ err: errorText(err) }, "missed control messages could not be fetched");
    }
  }
}
