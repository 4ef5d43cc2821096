import { describe, expect, it } from "vitest";
import { chainShape, togetherShape } from "../../src/wire/receipt-chains.js";
import type { ReceiptKind } from "../../src/wire/messages.js";

/** Which receipts sent back to back one compare-and-set may apply (the claim being a read's is checked on the record). */
describe("receipts applied together", () => {
  it.each<ReceiptKind[]>([
    ["progress", "completed"],
    ["progress", "failed"],
    ["progress", "cancelled"],
    ["accepted", "progress"],
    ["accepted", "completed"],
    ["accepted", "progress", "completed"],
  ])("takes %j", (...kinds) => expect(togetherShape(kinds)).toBe(true));

  it.each<ReceiptKind[]>([
    ["accepted"],
    ["progress"],
    ["completed", "progress"],
    ["progress", "progress"],
    ["accepted", "accepted"],
    ["accepted", "submission"],
    ["progress", "submission"],
    ["refused", "completed"],
    ["accepted", "progress", "completed", "completed"],
    ["progress", "completed", "progress"],
  ])("refuses %j", (...kinds) => expect(togetherShape(kinds)).toBe(false));
});

/** Which of those may travel as one message: only a claim's first receipts, so led by `accepted`. */
describe("receipts sent as one chain", () => {
  it.each<ReceiptKind[]>([
    ["accepted", "progress"],
    ["accepted", "completed"],
    ["accepted", "failed"],
    ["accepted", "progress", "completed"],
  ])("takes %j", (...kinds) => expect(chainShape(kinds)).toBe(true));

  it.each<ReceiptKind[]>([["accepted"], ["progress", "completed"], ["accepted", "submission"], ["accepted", "progress", "progress"]])(
    "refuses %j",
    (...kinds) => expect(chainShape(kinds)).toBe(false),
  );
});
