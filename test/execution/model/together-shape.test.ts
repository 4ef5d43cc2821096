import { describe, expect, it } from "vitest";
import { togetherShape } from "../../../src/execution/receipts/receipt-processor.js";
import type { ReceiptKind } from "../../../src/wire/messages.js";

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
