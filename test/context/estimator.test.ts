import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  bytesPerToken,
  DEFAULT_BYTES_PER_TOKEN,
  emptyCalibration,
  MIN_CALIBRATION_REPORTS,
  RATIO_WINDOW,
  withSample,
  type Calibration,
} from "../../src/context/estimator.js";
import { contextWindow } from "../../src/context/window.js";

const feed = (samples: number[], start: Calibration = emptyCalibration("bot.1")) => samples.reduce((c, s, i) => withSample(c, s, i), start);

describe("bytes-per-token estimator", () => {
  it("uses the conservative default before any report, and never less conservative before a median can outvote an outlier", () => {
    expect(bytesPerToken(emptyCalibration("bot.1"))).toBe(DEFAULT_BYTES_PER_TOKEN);
    expect(bytesPerToken(feed([9]))).toBe(DEFAULT_BYTES_PER_TOKEN); // one optimistic outlier changes nothing
    expect(bytesPerToken(feed([1.5]))).toBe(1.5); // a more conservative one is taken at once
    expect(bytesPerToken(feed([4, 4, 4].slice(0, MIN_CALIBRATION_REPORTS)))).toBe(4);
  });

  it("converges on a known ratio with noise and a quarter of outliers injected", () => {
    fc.assert(
      fc.property(
        fc.double({ min: 1.2, max: 6, noNaN: true }),
        fc.array(fc.tuple(fc.double({ min: -0.04, max: 0.04, noNaN: true }), fc.constantFrom(0.1, 0.3, 5, 40)), { minLength: 200, maxLength: 200 }),
        fc.integer({ min: 0, max: 3 }),
        (ratio, noise, phase) => {
          // Every fourth report (at a random phase) is an outlier, from a tenth to forty times the truth.
          const samples = noise.map(([jitter, factor], i) => (i % 4 === phase ? ratio * factor : ratio * (1 + jitter)));
          const estimate = bytesPerToken(feed(samples));
          expect(Math.abs(estimate - ratio) / ratio).toBeLessThan(0.05);
        },
      ),
      { seed: 11, numRuns: 200 },
    );
  });

  it("keeps only the latest reports, so a changed prompt or tokenizer is followed", () => {
    const before = feed(Array.from({ length: 100 }, () => 4));
    expect(before.samples).toHaveLength(RATIO_WINDOW);
    expect(before.reports).toBe(100);
    const after = feed(
      Array.from({ length: RATIO_WINDOW / 2 + 1 }, () => 3),
      before,
    );
    expect(bytesPerToken(after)).toBe(3);
  });

  it("refuses a sample that is no positive number", () => {
    for (const bad of [0, -1, Number.NaN, Number.POSITIVE_INFINITY]) expect(() => withSample(emptyCalibration("bot.1"), bad, 0)).toThrow(RangeError);
  });
});

describe("context window", () => {
  const calibrated = feed([4, 4, 4]);
  const window = (historyBytes: number, promptTextBytes: number) =>
    contextWindow({
      run_id: "r",
      agent_version: "bot.1",
      history_bytes: historyBytes,
      prompt_text_bytes: promptTextBytes,
      compacted_tool_calls: 0,
      max_context_tokens: 1000,
      calibration: calibrated,
    });

  it("must compact exactly when the estimate exceeds max_context_tokens", () => {
    expect(window(3000, 1000)).toMatchObject({ bytes: 4000, estimated_tokens: 1000, must_compact: false, bytes_per_token: 4, calibrated_from: 3 });
    expect(window(3001, 1000)).toMatchObject({ bytes: 4001, estimated_tokens: 1001, must_compact: true });
  });

  it("estimates tokens rounding up", () => {
    expect(window(1, 0).estimated_tokens).toBe(1);
    expect(window(0, 0)).toMatchObject({ estimated_tokens: 0, must_compact: false });
  });
});
