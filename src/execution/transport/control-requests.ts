import type { JetStreamClient, JsMsg } from "@nats-io/jetstream";
import { ToolgateError } from "../../errors/toolgate-error.js";
import type { Logger } from "../../log/logger.js";
import { decode, MalformedMessageError } from "../../wire/codec.js";
import { ControlRequest } from "../../wire/messages.js";
import { subjects } from "../../wire/subjects.js";
import type { CompensationService } from "../operations/compensation.js";
import { StreamWorker } from "./stream-worker.js";
import type { TaskCancelService } from "../operations/task-cancel.js";
import { CONTROL_REQUEST_CONSUMER, STREAMS } from "../../streams/names.js";

/**
 * Products may publish a task cancel or a compensation on `tg.ctl.<type>` instead of calling the HTTP
 * API; every gateway shares one durable consumer of them and applies them exactly like the routes.
 * A request refused for what it asks (404, 409: the same answer the API would give) is logged and
 * acknowledged, since repeating it cannot change the verdict; the outcome shows on the assignment
 * and in the run's event stream.
 */
export class ControlRequestConsumer {
  private readonly worker: StreamWorker;

  constructor(
    js: JetStreamClient,
    private readonly taskCancel: TaskCancelService,
    private readonly compensation: CompensationService,
    private readonly log: Logger,
  ) {
    this.worker = new StreamWorker(js, { stream: STREAMS.control, durable: CONTROL_REQUEST_CONSUMER }, (msg) => this.handle(msg), log, 8);
  }

  start(): Promise<void> {
    return this.worker.start();
  }

  stop(): Promise<void> {
    return this.worker.stop();
  }

  private async handle(msg: JsMsg): Promise<void> {
    let request: ControlRequest;
    try {
      request = decode(ControlRequest, msg.data);
      if (msg.subject !== subjects.controlRequest(request.type)) throw new MalformedMessageError(`a ${request.type} request published on ${msg.subject}`);
    } catch (err) {
      if (!(err instanceof MalformedMessageError)) throw err;
      this.log.warn({ seq: msg.seq, subject: msg.subject, reason: err.reason }, "malformed control request terminated");
      return msg.term();
    }
    try {
      if (request.type === "task_cancel") await this.taskCancel.request(request.assignment_id, request.reason);
      else await this.compensation.compensate(request.assignment_id);
      this.log.info({ seq: msg.seq, request }, "control request applied");
    } catch (err) {
      if (!(err instanceof ToolgateError) || !err.callerFault) throw err;
      this.log.info({ seq: msg.seq, request, code: err.code, reason: err.message }, "control request refused");
    }
    msg.ack();
  }
}
