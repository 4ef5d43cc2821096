import { headers, type MsgHdrs } from "@nats-io/transport-node";

/**
 * Receipts sent ahead of their answers. A gateway that keeps a claim's receipts in order says so on
 * its grant (the claim reply carries `Tg-Receipt-Order: after`). An executor that sees it may send a
 * claim's progress and final receipts without waiting for the answer to the one before, each naming
 * that one (`Tg-After: <receipt_id>`): the gateway applies a receipt only once the one it names is
 * applied, so progress 1..n and the final receipt still land in the order they were sent, whichever
 * gateway replica takes each. An executor that never sees the header (an older gateway) waits for
 * each answer, as before; a gateway takes receipts without `Tg-After` as they come.
 */
const RECEIPT_ORDER_HEADER = "Tg-Receipt-Order";
const RECEIPT_ORDER_AFTER = "after";
const AFTER_HEADER = "Tg-After";
/**
 * On a receipt sent after another (`Tg-After`): the executor takes one answer message for both
 * (`ReceiptAnswers`, a list) when the gateway applies them together. An executor that does not say
 * so gets one answer message per receipt, as before.
 */
const ANSWERS_HEADER = "Tg-Answers";
const ANSWERS_JOINT = "joint";

/** The headers of a claim reply from a gateway that keeps receipts sent ahead in order. */
export function receiptOrderHeaders(): MsgHdrs {
  const h = headers();
  h.set(RECEIPT_ORDER_HEADER, RECEIPT_ORDER_AFTER);
  return h;
}

/** Whether a claim reply's headers say its gateway keeps receipts sent ahead in order. */
export function ordersReceipts(headers: MsgHdrs | undefined): boolean {
  return headers?.get(RECEIPT_ORDER_HEADER) === RECEIPT_ORDER_AFTER;
}

/**
 * Marks a receipt's headers as sent ahead of the answer to receipt `after` (`Tg-After`), its
 * executor taking both answers in one message unless `jointAnswers` is false.
 */
export function markSentAfter(h: MsgHdrs, after: string, jointAnswers = true): void {
  h.set(AFTER_HEADER, after);
  if (jointAnswers) h.set(ANSWERS_HEADER, ANSWERS_JOINT);
}

/** The receipt a receipt's headers say it was sent after (its `Tg-After`), if any. */
export function sentAfter(headers: MsgHdrs | undefined): string | undefined {
  return headers?.get(AFTER_HEADER) || undefined;
}

/** Whether a receipt's headers say its executor takes the answers to it and to the one it names in one message. */
export function takesJointAnswers(headers: MsgHdrs | undefined): boolean {
  return headers?.get(ANSWERS_HEADER) === ANSWERS_JOINT;
}
