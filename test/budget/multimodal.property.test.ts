import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { buildContextPreview, compactByteLength, type PreviewResult } from "../../src/budget/index.js";
import { budget, multimodalResult } from "./arbitraries.js";
import { expectPreviewOf, expectValidJson, splitCutText } from "./expectations.js";

describe("multimodal projection properties", () => {
  it("multimodal: only text blocks are cut, to head + notice + tail, the budgeted part within budget", () => {
    fc.assert(
      fc.property(multimodalResult, budget, (result, max) => {
        const preview = buildContextPreview(result, { maxResultContextBytes: max });
        expectValidJson(preview);
        const projected = preview.result as Record<string, unknown>;
        if (!preview.truncated) {
          expect(projected).toBe(result);
        } else if ("preview" in projected) {
          expectPreviewOf(result, projected as unknown as PreviewResult, max, preview.original_bytes);
        } else {
          expectTextCuts(result.content, projected, max);
        }
      }),
      { numRuns: 2000 },
    );
  });
});

type Block = { type: string; text?: string };

function expectTextCuts(original: readonly Block[], projected: Record<string, unknown>, max: number): void {
  const content = projected.content as Block[];
  expect(content).toHaveLength(original.length);
  content.forEach((block, i) => {
    const before = original[i] as Block;
    if (block.type !== "text") {
      expect(block).toBe(before);
    } else if (block.text !== before.text) {
      const { head, omitted, tail } = splitCutText(block.text as string);
      expect(before.text?.startsWith(head) && before.text.endsWith(tail)).toBe(true);
      expect(omitted).toBe(Buffer.byteLength(before.text as string) - Buffer.byteLength(head) - Buffer.byteLength(tail));
    }
  });
  expect(compactByteLength({ ...projected, content: content.filter((b) => b.type === "text") })).toBeLessThanOrEqual(max);
}
