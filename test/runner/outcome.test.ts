import { describe, expect, it } from "vitest";
import { finalReceipt, reportOf, BusinessCancelled, BusinessFailure } from "../../src/runner/outcome.js";
import { answerChange, IllegalTransitionError, transition } from "../../src/runner/phases.js";
import { toJsonText } from "../../src/budget/index.js";
import { buildReceipt, receiptBodyText, wireReceipt, type ReceiptContent } from "../../src/runner/receipts.js";
import { isClaimReceiptId, ownReceiptNamed, progressIdPlace, receiptId, rerunTag } from "../../src/wire/receipt-ids.js";
import { encode } from "../../src/wire/codec.js";
import { Receipt } from "../../src/wire/messages.js";
import { sampleGrant } from "./helpers/grants.js";

describe("handler outcome model", () => {
  it("maps a return value, confirmed failures and cancellations, and any other exception", () => {
    expect(reportOf({ status: "fulfilled", value: { id: 1 } })).toEqual({ kind: "completed", result: { id: 1 } });
    expect(reportOf({ status: "rejected", reason: new BusinessFailure("quota", "over quota") })).toEqual({
      kind: "failed",
      error: { code: "quota", message: "over quota" },
    });
    expect(reportOf({ status: "rejected", reason: new BusinessCancelled("user stopped it") })).toEqual({ kind: "cancelled", reason: "user stopped it" });
    const err = Object.assign(new Error("socket hang up"), { code: "ECONNRESET" });
    expect(reportOf({ status: "rejected", reason: err })).toEqual({
      kind: "reconciliation_required",
      error: { code: "handler_error", message: "Error [ECONNRESET]: socket hang up" },
    });
    expect(reportOf({ status: "rejected", reason: "just a string" })).toMatchObject({ kind: "reconciliation_required" });
  });

  it("recognises a BusinessFailure from another copy of the library by its brand", () => {
    const foreign = Object.assign(new Error("nope"), { code: "x", [Symbol.for("toolgate.BusinessFailure")]: true });
    expect(reportOf({ status: "rejected", reason: foreign }).kind).toBe("failed");
  });

  it("turns a result JSON cannot represent into reconciliation, never a silently altered completed", () => {
    const grant = sampleGrant();
    for (const result of [
      { n: Number.NaN },
      { d: new Date(0) },
      (() => {
        const a: Record<string, unknown> = {};
        a.self = a;
        return a;
      })(),
    ]) {
      const r = finalReceipt(grant, { kind: "completed", result }, 1);
      expect(r.kind).toBe("reconciliation_required");
      expect(r.body.error).toMatchObject({ code: "unrepresentable_result" });
    }
  });
});

describe("receipts", () => {
  it("keep a bigint result exact (an int64 id is no float)", () => {
    const r = finalReceipt(sampleGrant(), { kind: "completed", result: { id: 2n ** 63n - 1n } }, 1);
    expect(r.kind).toBe("completed");
    expect(r.body.result).toEqual({ id: 9223372036854775807n });
  });

  it("derives ids from the claim (assignment, generation, token) and the receipt (kind, seq) only", () => {
    const claim = { assignment_id: "asg-9", generation: 2, claim_token: "t".repeat(43) };
    expect(receiptId(claim, { kind: "accepted" })).toMatch(/^asg-9_g2_accepted_[A-Za-z0-9_-]{22}$/);
    expect(receiptId(claim, { kind: "progress", seq: 3 })).toMatch(/^asg-9_g2_p3_[A-Za-z0-9_-]{22}$/);
    expect(receiptId(claim, { kind: "reconciliation_required" })).toMatch(/^asg-9_g2_reconciliation_required_/);
    expect(receiptId(claim, { kind: "progress", seq: 3 })).toBe(receiptId({ ...claim }, { kind: "progress", seq: 3 }));
    // Without the token nobody can tell the id in advance (the stream de-duplicates ids across executors).
    expect(receiptId({ ...claim, claim_token: "u".repeat(43) }, { kind: "accepted" })).not.toBe(receiptId(claim, { kind: "accepted" }));
    expect(receiptId(claim, { kind: "accepted" })).not.toContain(claim.claim_token);
    const long = receiptId({ ...claim, assignment_id: "a".repeat(128) }, { kind: "completed" });
    expect(long).toMatch(/^r_[A-Za-z0-9_-]{43}$/);
    expect(receiptId({ ...claim, assignment_id: "a".repeat(128) }, { kind: "completed" })).toBe(long);
  });

  it("gives a rerun read's final receipt an id of its own, which no claim-bound or readable form takes for the claim's", () => {
    const claim = { assignment_id: "asg-9", generation: 2, claim_token: "t".repeat(43) };
    const receipt = { ...claim, receipt_id: "", executor_id: "exec-1", kind: "completed", result: {} } as unknown as Receipt;
    const first = receiptId(claim, { kind: "completed" });
    const [a, b] = [rerunTag(), rerunTag()];
    expect(a).toMatch(/^[0-9a-f]{8}$/);
    expect(a).not.toBe(b);
    const rerun = receiptId(claim, { kind: "completed" }, a);
    expect(rerun).toMatch(new RegExp(`^asg-9_g2_completed_r${a}_[A-Za-z0-9_-]{22}$`));
    expect(receiptId(claim, { kind: "completed" }, a)).toBe(rerun);
    expect(new Set([first, rerun, receiptId(claim, { kind: "completed" }, b)]).size).toBe(3);
    // The gateway looks such an id up instead of taking it for the claim's own.
    expect(isClaimReceiptId({ ...receipt, receipt_id: first }, 2)).toBe(true);
    expect(isClaimReceiptId({ ...receipt, receipt_id: rerun }, 2)).toBe(false);
    expect(progressIdPlace(rerun)).toBeNull();
    expect(ownReceiptNamed(rerun, receipt)).toBeUndefined();
    const long = { ...claim, assignment_id: "a".repeat(128) };
    expect(receiptId(long, { kind: "completed" }, a)).toMatch(/^r_[A-Za-z0-9_-]{43}$/);
    expect(receiptId(long, { kind: "completed" }, a)).not.toBe(receiptId(long, { kind: "completed" }));
  });

  it("sends the saved body with the claim token and the replay flag as transport fields", () => {
    const grant = sampleGrant();
    const saved = buildReceipt(grant, { kind: "failed", error: { code: "c".repeat(300), message: "m" } }, 1);
    expect((saved.body.error as { code: string }).code).toHaveLength(128);
    expect(wireReceipt(saved, grant.claim_token, true)).toEqual({ ...saved.body, claim_token: grant.claim_token, replayed: true });
    expect(wireReceipt(saved, grant.claim_token, false)).not.toHaveProperty("replayed");
  });

  it("puts on the wire the very bytes the schema's parse gives, for every kind (the body is no longer parsed per send)", () => {
    const grant = sampleGrant();
    const contents: ReceiptContent[] = [
      { kind: "accepted", operation_key: grant.operation_key, argument_digest: grant.argument_digest },
      { kind: "refused", error: { code: "authorization_refused", message: "no" } },
      { kind: "progress", seq: 2, progress: { page: 1, of: [1, 2], note: "z first, a last" } },
      { kind: "submission", task_ref: "job-1", status: "queued" },
      { kind: "completed", result: { z: 1, a: { y: [true, null], b: 2n } } },
      { kind: "failed", error: { code: "quota", message: "over quota" } },
      { kind: "cancelled", reason: "stopped" },
      { kind: "reconciliation_required", error: { code: "handler_error", message: "lost" } },
    ];
    for (const content of contents) {
      const saved = buildReceipt(grant, content, 1);
      // The text kept from building it is what the store would write of the body anyway.
      expect(receiptBodyText(saved.body)).toBe(toJsonText(saved.body));
      for (const replayed of [false, true]) {
        const parsed = Receipt.parse({ ...saved.body, claim_token: grant.claim_token, ...(replayed ? { replayed } : {}) });
        expect(Buffer.from(encode(wireReceipt(saved, grant.claim_token, replayed))).toString("hex"), `${content.kind}, replayed ${replayed}`).toBe(
          Buffer.from(encode(parsed)).toString("hex"),
        );
      }
    }
  });
});

describe("local assignment phases", () => {
  it("allows only the table's edges", () => {
    expect(transition("accepting", "confirm")).toEqual({ from: "accepting", to: "confirmed" });
    expect(() => transition("accepting", "start")).toThrow(IllegalTransitionError);
    expect(() => transition("settled", "reconcile")).toThrow(IllegalTransitionError);
  });

  it("confirms only on an explicit recorded answer to accepted", () => {
    expect(answerChange("accepted", "recorded", "accepting")?.to).toBe("confirmed");
    for (const status of ["duplicate", "late_ignored", "rejected"] as const) expect(answerChange("accepted", status, "accepting")?.to).toBe("refused");
    expect(answerChange("progress", "rejected", "running")).toBeUndefined();
    expect(answerChange("reconciliation_required", "recorded", "reporting")?.to).toBe("awaiting_reconciliation");
    expect(answerChange("reconciliation_required", "late_ignored", "reporting")?.to).toBe("settled");
    expect(answerChange("completed", "rejected", "reporting")?.to).toBe("settled");
    expect(answerChange("refused", "recorded", "reporting")?.to).toBe("settled");
  });

  it("keeps the outcome a read saved ahead of the answer to accepted queued on recorded, and refuses it otherwise", () => {
    expect(transition("accepting", "report")).toEqual({ from: "accepting", to: "reporting" });
    expect(answerChange("accepted", "recorded", "reporting")).toBeUndefined();
    for (const status of ["late_ignored", "rejected"] as const)
      expect(answerChange("accepted", status, "reporting")).toEqual({ from: "reporting", to: "refused" });
    expect(() => transition("accepting", "submit")).toThrow(IllegalTransitionError);
    // Refused, the claim changes no more: what was saved behind `accepted` is still answered.
    expect(answerChange("completed", "late_ignored", "refused")).toBeUndefined();
    expect(answerChange("progress", "rejected", "refused")).toBeUndefined();
  });
});
