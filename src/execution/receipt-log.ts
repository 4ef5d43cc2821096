import type { JetStreamManager } from "@nats-io/jetstream";
import { decode } from "../wire/codec.js";
import { Receipt } from "../wire/messages.js";
import { STREAMS } from "../wire/subjects.js";

/** The receipts stream read back: every receipt is kept there as received (the audit record). */
export class ReceiptLog {
  constructor(private readonly jsm: JetStreamManager) {}

  /** The receipt stored at `seq` of `TG_RECEIPTS`. */
  async read(seq: number): Promise<Receipt> {
    const msg = await this.jsm.streams.getMessage(STREAMS.receipts, { seq });
    if (!msg) throw new Error(`receipt at ${STREAMS.receipts} sequence ${seq} is missing`);
    return decode(Receipt, msg.data);
  }
}
