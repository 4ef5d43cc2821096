import { headers, type MsgHdrs } from "@nats-io/transport-node";
import type { ReceiptKind } from "./messages.js";
import { ordersReceipts } from "./receipt-order.js";

/**
 * Receipts applied together, and a read's first receipts sent as one message (a *chain*).
 *
 * A gateway applies a read's `accepted` with the progress report and final receipt sent right behind
 * it (or a report with the final receipt behind it) in one compare-and-set. A gateway that also takes
 * them in one stored message says so on its grant (`Tg-Receipt-Chains: first`): the executor may then
 * publish a read's `accepted` and what follows it as one message of the receipts stream, a list of
 * receipts, instead of one message each. Two rules make the stream's de-duplication still answer for
 * every receipt in it:
 * - its `Nats-Msg-Id` is the id of its first receipt (`accepted`), so a resend of that one alone is
 *   dropped by the stream as any resend is;
 * - it is published with `Nats-Expected-Last-Subject-Sequence: 0`, so the stream stores it only as the
 *   first message of this executor on this assignment's receipt subject: no receipt of it can have
 *   been stored (or answered) before. The server keeps the header on the stored message, which is how
 *   a gateway knows the rule held.
 * A gateway that cannot apply a chain whole decides its first receipt alone and answers the others
 * `pending`, storing nothing of them: the executor sends those alone. A chain delivered again after it
 * was applied whole is answered from the assignment's record, as the first time.
 */
const CHAINS_HEADER = "Tg-Receipt-Chains";
const CHAINS_FIRST = "first";
/** The server's header: store the message only if the subject's last sequence is this (0: none). */
const EXPECTED_LAST_SUBJECT_SEQUENCE = "Nats-Expected-Last-Subject-Sequence";

/** The receipts that settle running work, which a progress report may be applied together with. */
const SETTLING_KINDS: ReadonlySet<ReceiptKind> = new Set(["completed", "failed", "cancelled"]);

/** The most receipts `togetherShape` takes: `accepted`, a report and a settling receipt. */
export const LONGEST_TOGETHER = 3;

/**
 * Whether receipts of these kinds, in this order, may be applied together: at least two of a read's
 * `accepted`, one progress report and a settling receipt, in that order (the gateway checks that the
 * claim is a read's).
 */
export function togetherShape(kinds: readonly ReceiptKind[]): boolean {
  let i = 0;
  if (kinds[i] === "accepted") i++;
  if (kinds[i] === "progress") i++;
  if (kinds[i] !== undefined && SETTLING_KINDS.has(kinds[i]!)) i++;
  return kinds.length >= 2 && i === kinds.length;
}

/** Whether receipts of these kinds may travel as one chain: a shape applied together, led by `accepted` (a claim's first receipt). */
export function chainShape(kinds: readonly ReceiptKind[]): boolean {
  return kinds[0] === "accepted" && togetherShape(kinds);
}

/** Marks a claim reply's headers as from a gateway that takes a read's first receipts as one message; returns them. */
export function markTakesChains(h: MsgHdrs): MsgHdrs {
  h.set(CHAINS_HEADER, CHAINS_FIRST);
  return h;
}

/** What a claim's gateway said it takes of the claim's receipts, on its reply. */
export interface ReceiptTerms {
  /** Receipts sent ahead of the answers before them, kept in order (`src/wire/receipt-order.ts`). */
  ordersReceipts: boolean;
  /** A read's first receipts as one message. */
  takesChains: boolean;
}

/** The terms a claim reply's headers state (none from an older gateway). */
export function receiptTermsOf(h: MsgHdrs | undefined): ReceiptTerms {
  return { ordersReceipts: ordersReceipts(h), takesChains: h?.get(CHAINS_HEADER) === CHAINS_FIRST };
}

/** The headers a chain is published with: de-duplicated on its first receipt's id, stored only as the subject's first message. */
export function chainHeaders(firstReceiptId: string, base: MsgHdrs = headers()): MsgHdrs {
  base.set("Nats-Msg-Id", firstReceiptId);
  base.set(EXPECTED_LAST_SUBJECT_SEQUENCE, "0");
  return base;
}

/** Whether a stored message's headers say the stream took it only as the first message of its subject. */
export function storedFirstOnSubject(h: MsgHdrs | undefined): boolean {
  return h?.get(EXPECTED_LAST_SUBJECT_SEQUENCE) === "0";
}
