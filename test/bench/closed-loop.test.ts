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
    starts.forEach((at, n) => expect(at).toBeGreaterThanOrEqual(n * 5));
  });

  it("unpaced, keeps every caller calling until the level's time is up", async () => {
    const outcome = await closedLoop({ concurrency: 8, seconds: 0.2 }, () => new Promise((resolve) => setImmediate(resolve)));
    // Calls that take one turn of the event loop: far more than a pacing of 200 a second would allow.
    expect(outcome.calls).toBeGreaterThan(1_000);
  });

  it("paced, starts at once the calls whose turns passed while the system was behind", async () => {
    // One caller at 100 a second: its first call takes 100 ms, so the turns at 10, 20, ..., 90 ms have
    // passed when it ends, and those nine calls (instant) start together, not 10 ms apart.
    const starts: number[] = [];
    const began = performance.now();
    await closedLoop({ concurrency: 1, seconds: 0.2, rate: 100 }, async () => {
      starts.push(performance.now() - began);
      if (starts.length === 1) await new Promise((resolve) => setTimeout(resolve, 100));
    });
    const caughtUp = starts.slice(1, 10);
    expect(caughtUp).toHaveLength(9);
    expect(caughtUp[0]).toBeGreaterThan(95); // after the first call (its timer may fire a little early)
    // Paced by a pause after each call instead, they would spread over 80 ms.
    expect(caughtUp[8]! - caughtUp[0]!).toBeLessThan(40);
  });
});
