import { describe, expect, it } from "vitest";
import { buildContextPreview, DEFAULT_RESULT_CONTEXT_BYTES, maxResultContextBytesSchema, resultContextBudgetSchema } from "../../src/budget/index.js";

describe("max_result_context_bytes", () => {
  it.each([1024, 1025, 16384, 32767, 32768])("accepts %i", (n) => {
    expect(maxResultContextBytesSchema.parse(n)).toBe(n);
  });

  it.each([1023, 32769, 0, -1, 1024.5, NaN, Infinity, "2048", null])("rejects %o, naming the allowed range", (n) => {
    const parsed = maxResultContextBytesSchema.safeParse(n);
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues[0]?.message).toContain("integer from 1024 to 32768");
  });

  it("defaults to 16384 and fails the removed fields without alias", () => {
    expect(DEFAULT_RESULT_CONTEXT_BYTES).toBe(16384);
    expect(resultContextBudgetSchema.parse({})).toEqual({ max_result_context_bytes: 16384 });
    for (const removed of ["max_result_tokens", "max_result_bytes"]) {
      const parsed = resultContextBudgetSchema.safeParse({ [removed]: 4096 });
      expect(parsed.success).toBe(false);
      expect(parsed.error?.issues[0]?.message).toContain(`${removed} was removed`);
    }
  });

  it("is validated by buildContextPreview", () => {
    expect(() => buildContextPreview({}, { maxResultContextBytes: 1023 })).toThrow(/integer from 1024 to 32768/);
    expect(() => buildContextPreview({}, { maxResultContextBytes: 32769 })).toThrow(/integer from 1024 to 32768/);
  });
});
