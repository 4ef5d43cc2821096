import { describe, expect, it } from "vitest";
import { closedLoop } from "../../bench/lib/closed-loop.js";

/** The load every comparison bench puts on its systems: a closed loop, or one paced to a rate (`BENCH_RATE`). */
describe("the benches' closed loop", () => {
  it("paced to a rate, starts the n-th call no sooner than n ÷ rate into the level, and none after it", async () => {
    const starts: number[] = [];
    const began = performance.now();
    const outcome = await closedLoop({ concurrency: 8, seconds: 0.5, rate: 200 }, async () => {
      starts.push(performance.now() - began);
    });
    // 200 a second for half a second: turns at 0, 5, ..., 495 ms, and no more.
    expect(outcome.calls).toBeLessThanOrEqual(100);
    expect(outcome.calls).toBeGreaterThan(50);
    // A timer fires no sooner than asked; a millisecond of slack for the clocks' rounding.
    starts.forEach((at, n) => expect(at).toBeGreaterThanOrEqual(n * 5 - 1));
  });

  it("unpaced, keeps every caller calling until the level's time is up", async () => {
    const outcome = await closedLoop({ concurrency: 8, seconds: 0.2 }, () => new Promise((resolve) => setImmediate(resolve)));
    // Calls that take one turn of the event loop: far more than a pacing of 200 a second would allow.
    expect(outcome.calls).toBeGreaterThan(1_000);
  });

  it("paced, runs as a closed loop while the system is behind the schedule", async () => {
    // Calls of 20 ms, one caller, a rate of 1,000 a second: the schedule is always ahead, so no caller waits.
    const outcome = await closedLoop({ concurrency: 1, seconds: 0.2, rate: 1_000 }, () => new Promise((resolve) => setTimeout(resolve, 20)));
    expect(outcome.calls).toBeGreaterThanOrEqual(5);
    expect(outcome.calls).toBeLessThanOrEqual(11);
  });
});
