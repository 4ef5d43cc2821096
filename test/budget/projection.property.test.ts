/**
 * Property tests of the projection: 2,500 generated results here, with the 2,000 of
 * multimodal.property.test.ts and the 3,000 of canonical-json.test.ts 11,000 per run.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { buildContextPreview, canonicalJson, compactByteLength, type PreviewResult } from "../../src/budget/index.js";
import { budget, toolResult } from "./arbitraries.js";
import { expectPreviewOf, expectValidJson } from "./expectations.js";

describe("projection properties", () => {
  it("is valid JSON and UTF-8, within budget, a true head/tail, keeps preserved values, deterministic", () => {
    fc.assert(
      fc.property(toolResult, budget, (result, max) => {
        const preview = buildContextPreview(result, { maxResultContextBytes: max });
        expectValidJson(preview);
        expect(preview.original_bytes).toBe(compactByteLength(result));
        if (preview.truncated) {
          expect(preview.retained_bytes).toBeLessThanOrEqual(max);
          expectPreviewOf(result, preview.result as unknown as PreviewResult, max, preview.original_bytes);
        } else {
          expect(preview.result).toBe(result);
          expect(preview.original_bytes).toBeLessThanOrEqual(max);
        }
        expect(canonicalJson(buildContextPreview(result, { maxResultContextBytes: max }))).toBe(canonicalJson(preview));
      }),
      { numRuns: 2500 },
    );
  });
});
