/**
 * The bytes-per-token ratio of one agent version, calibrated from real usage (docs/protocol.md section 5:
 * whether a request must be compacted is decided by `max_context_tokens` and a token estimate
 * calibrated from real usage reports).
 *
 * Each usage report gives one sample: the context bytes the gateway counts for the run at that time
 * divided by the input tokens the model actually billed. The estimate is the **median of the most
 * recent {@link RATIO_WINDOW} samples**:
 * - robust: a report skewed by something the bytes do not show (image tokens, a cached prefix, a
 *   report sent late, after more results arrived) moves a median by at most one rank, and up to half
 *   the window can be outliers before it follows them; a mean would follow every one;
 * - recent: a window, not all history, so a changed system prompt or model tokenizer is followed
 *   within about half a window of reports;
 * - small and exact: the state is a short list, updated by compare-and-set, with no floating drift.
 *
 * Before {@link MIN_CALIBRATION_REPORTS} reports a median cannot outvote a single outlier, so the
 * estimate is never less conservative than the default: min(default, median).
 */
import { z } from "zod";

/**
 * Ratio used before any report, deliberately low (so tokens are over-estimated and compaction comes
 * early rather than a request overflowing): English prose and JSON tokenize at about 3.5-4.5 bytes
 * per token, CJK text (3 UTF-8 bytes a character) and ids, hashes or base64 at about 2-3.
 */
export const DEFAULT_BYTES_PER_TOKEN = 2;

/** Recent samples the median is taken over. */
export const RATIO_WINDOW = 32;

/** Reports needed before the median alone is trusted (a median of 3 outvotes one outlier). */
export const MIN_CALIBRATION_REPORTS = 3;

export const CalibrationSchema = z
  .object({
    agent_version: z.string(),
    /** Bytes per token of the latest reports, oldest first, at most RATIO_WINDOW. */
    samples: z.array(z.number().positive()).max(RATIO_WINDOW),
    /** Every report ever taken in (the window keeps only the latest). */
    reports: z.number().int().nonnegative(),
    updated_at: z.number().int().nonnegative(),
  })
  .strict();
export type Calibration = z.infer<typeof CalibrationSchema>;

export function emptyCalibration(agentVersion: string): Calibration {
  return { agent_version: agentVersion, samples: [], reports: 0, updated_at: 0 };
}

/** The calibration with one more sample, the oldest dropped beyond the window. */
export function withSample(calibration: Calibration, bytesPerToken: number, now: number): Calibration {
  if (!(bytesPerToken > 0 && Number.isFinite(bytesPerToken))) throw new RangeError(`a bytes-per-token sample must be a positive number, not ${bytesPerToken}`);
  return {
    ...calibration,
    samples: [...calibration.samples, bytesPerToken].slice(-RATIO_WINDOW),
    reports: calibration.reports + 1,
    updated_at: now,
  };
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** The bytes-per-token ratio to estimate with. */
export function bytesPerToken(calibration: Calibration): number {
  if (calibration.samples.length === 0) return DEFAULT_BYTES_PER_TOKEN;
  const m = median(calibration.samples);
  return calibration.reports < MIN_CALIBRATION_REPORTS ? Math.min(DEFAULT_BYTES_PER_TOKEN, m) : m;
}
