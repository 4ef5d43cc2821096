import { createHmac, randomBytes } from "node:crypto";
import type { Grant, Receipt, ReceiptKind } from "./messages.js";

/** The longest id a NATS key token may be (`Id`). */
const MAX_ID = 128;

/** Characters of the secret tag in a readable receipt id (base64url, 132 bits). */
const TAG_CHARS = 22;

/**
 * The receipt id of one receipt of one claim: a pure function of the claim (assignment, generation,
 * claim token) and the receipt (its kind, and its seq for progress), so a restart can never mint a second id for it. The
 * generation keeps a claim lost and won again apart from the old one.
 *
 * The stream de-duplicates on `receipt_id` across every executor, so an id others could predict
 * could be published first by any of them (their receipt is refused, but the stream would then drop
 * ours as a duplicate for its whole window). Hence the tag: an HMAC keyed by the claim token, which
 * only the holder of the claim knows, and nobody before the claim was granted. It reveals nothing
 * of the token.
 *
 * `rerun`: the final receipt of a read run again after a restart (`rerunTag`). Its first run's final
 * receipt may have left before it was durable and been lost with the runner's store, so the rerun's,
 * whose result may differ, takes an id of its own instead of minting the first one's again with
 * another body. Such an id is not the one a claim's receipt has (`isClaimReceiptId`): the gateway
 * looks it up like any executor-chosen id.
 */
export function receiptId(
  grant: Pick<Grant, "assignment_id" | "generation" | "claim_token">,
  receipt: { kind: ReceiptKind; seq?: number },
  rerun?: string,
): string {
  const named = receipt.kind === "progress" ? `p${receipt.seq}` : receipt.kind;
  const readable = `${grant.assignment_id}_g${grant.generation}_${named}${rerun === undefined ? "" : `_r${rerun}`}`;
  const tag = createHmac("sha256", grant.claim_token).update(readable).digest("base64url");
  const id = `${readable}_${tag.slice(0, TAG_CHARS)}`;
  // Long assignment ids: the full tag alone keeps the id deterministic and inside the token limit.
  return id.length <= MAX_ID ? id : `r_${tag}`;
}

/**
 * Whether `receipt` carries the id `receiptId` mints for it under the claim of `generation` whose
 * token it presents. Such an id could not be known before that claim was granted, and it names one
 * receipt of the claim (its kind, and its seq for progress): the gateway relies on both to decide a
 * fresh one without looking it up (`ReceiptProcessor`).
 */
export function isClaimReceiptId(receipt: Receipt, generation: number): boolean {
  return receipt.receipt_id === receiptId({ assignment_id: receipt.assignment_id, generation, claim_token: receipt.claim_token }, receipt);
}

/** A tag for `receiptId`'s `rerun`: lowercase hex, so no readable form below can end inside it. */
export function rerunTag(): string {
  return randomBytes(4).toString("hex");
}

/** The readable form of a progress receipt's claim-bound id: `<assignment>_g<generation>_p<seq>_<tag>`. */
const READABLE_PROGRESS_ID = new RegExp(`^(.+)_g(0|[1-9][0-9]*)_p([1-9][0-9]*)_[A-Za-z0-9_-]{${TAG_CHARS}}$`);
/** The readable form of a progress report's or an `accepted`'s claim-bound id (the seq for a report alone). */
const READABLE_NAMED_ID = new RegExp(`^(.+)_g(0|[1-9][0-9]*)_(?:p([1-9][0-9]*)|accepted)_[A-Za-z0-9_-]{${TAG_CHARS}}$`);

/**
 * The assignment and seq a progress receipt id names, when it has the readable form `receiptId`
 * mints (any id may look so; only a check against the claim, `isClaimReceiptId`, says it is one).
 * Where the progress of a claim-bound id is stored as its own index entry, this is how it is found.
 */
export function progressIdPlace(id: string): { assignment_id: string; seq: number } | null {
  const m = READABLE_PROGRESS_ID.exec(id);
  if (!m) return null;
  const seq = Number(m[3]);
  return Number.isSafeInteger(seq) ? { assignment_id: m[1]!, seq } : null;
}

/**
 * Which receipt of the claim `receipt` presents the token of `id` is the id of, when `receiptId`
 * minted it for a progress report or the `accepted` of that claim's assignment (its readable form
 * names the generation, and the seq of a report, which the tag then proves); undefined for any other id.
 */
export function ownReceiptNamed(id: string, receipt: Pick<Receipt, "assignment_id" | "claim_token">): "progress" | "accepted" | undefined {
  const m = READABLE_NAMED_ID.exec(id);
  if (!m || m[1] !== receipt.assignment_id) return undefined;
  const generation = Number(m[2]);
  const named = m[3] === undefined ? { kind: "accepted" as const } : { kind: "progress" as const, seq: Number(m[3]) };
  if (!Number.isSafeInteger(generation) || (named.kind === "progress" && !Number.isSafeInteger(named.seq))) return undefined;
  return id === receiptId({ ...receipt, generation }, named) ? named.kind : undefined;
}
