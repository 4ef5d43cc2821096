import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CRASH_POINTS, TASK_CRASH_POINTS } from "../fixtures/crash-points.js";
import { startTestNats, type TestNats } from "../helpers/nats.js";
import { FULL, FaultRig, size } from "./rig.js";

const CALLS = size(100, 1_000);

describe("executors SIGKILLed at random protocol steps, restarted by a supervisor", () => {
  let nats: TestNats;
  let rig: FaultRig;

  beforeAll(async () => {
    nats = await startTestNats();
    rig = new FaultRig(() => nats.url);
    await rig.startGateway();
    await rig.seed();
  });
  afterAll(async () => {
    await rig?.close();
    await nats?.stop();
  });

  it(
    `${CALLS} tool calls, every step a possible kill: the checker passes`,
    async () => {
      const started = Date.now();
      // About one kill per five calls: each call passes some eight crash points.
      rig.startExecutors(4, { TOOLGATE_CRASH_RATE: "0.025", HANDLER_WORK_MS: "20" });
      await rig.drive({ runs: CALLS / 5, concurrentRuns: size(5, 20), callsPerRun: 5, batch: 5, cancelRate: 0.05, writeShare: 0.6, asyncShare: 0.3 });
      const report = await rig.check();
      console.log(`executor kills: ${rig.summary(report)}, ${Date.now() - started} ms`);
      expect(report.violations).toEqual([]);
      // Kills cascade (a restart replays what it held), so their number spreads widely: quick runs gave 5 to 25.
      expect(rig.pool.totalKills).toBeGreaterThan(size(2, 100));
      // Async tasks were in the mix, and settled like every call (the checker's task rules passed).
      expect(report.counts.task_results).toBeGreaterThan(0);
      // The full matrix must have killed at every step at least once.
      if (FULL) expect([...CRASH_POINTS, ...TASK_CRASH_POINTS].filter((p) => !rig.pool.kills.has(p))).toEqual([]);
    },
    size(170_000, 900_000),
  );
});
