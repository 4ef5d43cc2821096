import type { JetStreamManager } from "@nats-io/jetstream";
import { STORED_MAX_JSON_DEPTH } from "../../validation/json-depth.js";
import { decode } from "../../wire/codec.js";
import { OperatorReceipt, ReceiptMessage, type Receipt } from "../../wire/messages.js";
import { itemsOf } from "../../wire/primitives.js";
import { STREAMS } from "../../streams/names.js";

/** Where a receipt is kept: the sequence of its message in `TG_RECEIPTS`, and its id (a chain's message holds several). */
export interface StoredAt {
  stream_seq: number;
  receipt_id: string;
}

/** The receipts stream read back: every receipt is kept there as received (the audit record). */
export class ReceiptLog {
  constructor(private readonly jsm: JetStreamManager) {}

  /** The receipt `at` names: an executor's (alone in its message, or in a chain), or an operator's settlement. */
  async read(at: StoredAt): Promise<Receipt | OperatorReceipt> {
    const msg = await this.jsm.streams.getMessage(STREAMS.receipts, { seq: at.stream_seq });
    if (!msg) throw new Error(`receipt at ${STREAMS.receipts} sequence ${at.stream_seq} is missing`);
    // Read back as stored: an operator's settlement came over HTTP, under that body's own depth bound.
    if (msg.subject.startsWith("tg.oprcpt.")) return decode(OperatorReceipt, msg.data, STORED_MAX_JSON_DEPTH);
    const receipt = itemsOf(decode(ReceiptMessage, msg.data, STORED_MAX_JSON_DEPTH)).find((r) => r.receipt_id === at.receipt_id);
    if (!receipt) throw new Error(`the message at ${STREAMS.receipts} sequence ${at.stream_seq} holds no receipt '${at.receipt_id}'`);
    return receipt;
  }

  /** The result of the `completed` receipt `at` names. */
  async completedResult(at: StoredAt): Promise<unknown> {
    const receipt = await this.read(at);
    if (receipt.kind !== "completed") throw new Error(`receipt at sequence ${at.stream_seq} is ${receipt.kind}, not completed`);
    return receipt.result;
  }
}
