import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestNats, type TestNats } from "../helpers/nats.js";
import { rssBytes, type GatewayProcess } from "../helpers/processes.js";
import { FaultRig, size } from "./rig.js";
import { until } from "../helpers/until.js";

const CALLS = size(300, 10_000);
const RUNS_AT_ONCE = size(20, 100);
const MB = 1024 * 1024;

describe("soak: many runs at once, mixed reads and writes with progress, 5% of runs cancelled", () => {
  let nats: TestNats;
  let rig: FaultRig;
  let gateway: GatewayProcess;

  beforeAll(async () => {
    nats = await startTestNats();
    rig = new FaultRig(() => nats.url);
    gateway = await rig.startGateway();
    await rig.seed();
  });
  afterAll(async () => {
    await rig?.close();
    await nats?.stop();
  });

  it(
    `${CALLS} tool calls from ${RUNS_AT_ONCE} concurrent runs and 4 executors: the checker passes, the gateway's memory stays flat`,
    async () => {
      const started = Date.now();
      rig.startExecutors(4, { MAX_CONCURRENT: "32" });
      const pid = gateway.proc.pid!;
      const rss = { start: rssBytes(pid), warm: 0, peak: 0, end: 0 };
      // Sampling only (not synchronisation): the peak over the whole soak.
      const sampler = setInterval(() => (rss.peak = Math.max(rss.peak, rssBytes(pid))), 500);
      const load = rig.drive({ runs: CALLS / 10, concurrentRuns: RUNS_AT_ONCE, callsPerRun: 10, batch: 5, cancelRate: 0.05, writeShare: 0.5 });
      await until("a quarter of the load settled (warm)", () => (rig.stats.settled >= CALLS / 4 ? true : undefined), 900_000, 250);
      rss.warm = rssBytes(pid);
      await load;
      rss.end = rssBytes(pid);
      clearInterval(sampler);
      const seconds = (Date.now() - started) / 1000;
      const report = await rig.check();
      console.log(
        `soak: ${rig.summary(report)}, ${seconds.toFixed(0)} s (${(rig.stats.calls / seconds).toFixed(0)} calls/s); gateway RSS start ${(rss.start / MB).toFixed(0)} MB, warm ${(rss.warm / MB).toFixed(0)} MB, peak ${(rss.peak / MB).toFixed(0)} MB, end ${(rss.end / MB).toFixed(0)} MB`,
      );
      expect(report.violations).toEqual([]);
      expect(rig.stats.cancelled).toBeGreaterThan(0);
      expect(report.counts.progress).toBeGreaterThan(0);
      // Every progress report is carried by its assignment's record, which answers for its receipt (store layout 4).
      expect(report.counts.progress_in_records).toBe(report.counts.progress);
      // Flat: after warm-up the gateway does not keep growing with the number of calls it has served.
      expect(rss.end).toBeLessThan(rss.warm * 1.5 + 32 * MB);
    },
    size(170_000, 1_800_000),
  );
});
