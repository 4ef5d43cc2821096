import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestNats, type TestNats } from "../helpers/nats.js";
import { FaultRig, size } from "./rig.js";
import { until } from "../helpers/until.js";

const CALLS = size(100, 1_000);
const KILLS = size(1, 3);

describe("a gateway SIGKILLed mid-flight, another gateway takes over its durable consumers", () => {
  let nats: TestNats;
  let rig: FaultRig;

  beforeAll(async () => {
    nats = await startTestNats();
    rig = new FaultRig(() => nats.url);
    await rig.startGateway();
    await rig.startGateway();
    await rig.seed();
  });
  afterAll(async () => {
    await rig?.close();
    await nats?.stop();
  });

  it(
    `${CALLS} tool calls through two gateways, ${KILLS} killed and replaced: the checker passes`,
    async () => {
      const started = Date.now();
      rig.startExecutors(4, { HANDLER_WORK_MS: "50" });
      const load = rig.drive({ runs: CALLS / 5, concurrentRuns: size(10, 20), callsPerRun: 5, batch: 5, cancelRate: 0.05, writeShare: 0.6, asyncShare: 0.3 });
      for (let k = 1; k <= KILLS; k++) {
        await until(`${k} of ${KILLS + 1} parts of the load settled`, () => (rig.stats.settled >= (CALLS * k) / (KILLS + 1) ? true : undefined), 300_000);
        // The oldest live gateway dies with receipts and claims in flight; a fresh one joins the survivor.
        await rig.live()[0]!.kill();
        await rig.startGateway();
      }
      await load;
      const report = await rig.check();
      console.log(`gateway takeover: ${rig.summary(report)}, gateway kills ${KILLS}, ${Date.now() - started} ms`);
      expect(report.violations).toEqual([]);
      expect(rig.stats.settled).toBe(CALLS);
      // Async tasks were in the mix: their settlements crossed the takeovers too.
      expect(report.counts.task_results).toBeGreaterThan(0);
    },
    size(170_000, 900_000),
  );
});
