import type { JetStreamManager } from "@nats-io/jetstream";
import { STORED_MAX_JSON_DEPTH } from "../../validation/json-depth.js";
import { decode } from "../../wire/codec.js";
import { OperatorReceipt, Receipt } from "../../wire/messages.js";
import { STREAMS } from "../../streams/names.js";

/** The receipts stream read back: every receipt is kept there as received (the audit record). */
export class ReceiptLog {
  constructor(private readonly jsm: JetStreamManager) {}

  /** The receipt stored at `seq` of `TG_RECEIPTS`: an executor's, or an operator's settlement. */
  async read(seq: number): Promise<Receipt | OperatorReceipt> {
    const msg = await this.jsm.streams.getMessage(STREAMS.receipts, { seq });
    if (!msg) throw new Error(`receipt at ${STREAMS.receipts} sequence ${seq} is missing`);
    // Read back as stored: an operator's settlement came over HTTP, under that body's own depth bound.
    return msg.subject.startsWith("tg.oprcpt.") ? decode(OperatorReceipt, msg.data, STORED_MAX_JSON_DEPTH) : decode(Receipt, msg.data, STORED_MAX_JSON_DEPTH);
  }

  /** The result of the `completed` receipt at `seq`. */
  async completedResult(seq: number): Promise<unknown> {
    const receipt = await this.read(seq);
    if (receipt.kind !== "completed") throw new Error(`receipt at sequence ${seq} is ${receipt.kind}, not completed`);
    return receipt.result;
  }
}
