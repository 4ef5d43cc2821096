import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startNatsServer, type NatsServerProcess } from "../../src/nats/nats-server-process.js";
import { FaultRig, size } from "./rig.js";
import { until } from "../helpers/until.js";

const CALLS = size(100, 1_000);
const RESTARTS = size(1, 3);

describe("nats-server SIGKILLed and restarted on the same store dir while calls are in flight", () => {
  let nats: NatsServerProcess;
  let rig: FaultRig;

  beforeAll(async () => {
    nats = await startNatsServer();
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
    `${CALLS} tool calls, NATS killed ${RESTARTS} time(s): the checker passes`,
    async () => {
      const started = Date.now();
      rig.startExecutors(4, { HANDLER_WORK_MS: "50" });
      const load = rig.drive({ runs: CALLS / 5, concurrentRuns: size(10, 20), callsPerRun: 5, batch: 5, cancelRate: 0.05, writeShare: 0.6 });
      for (let k = 1; k <= RESTARTS; k++) {
        await until(`${k} of ${RESTARTS + 1} parts of the load settled`, () => (rig.stats.settled >= (CALLS * k) / (RESTARTS + 1) ? true : undefined), 300_000);
        await nats.kill();
        await nats.restart();
      }
      await load;
      const report = await rig.check();
      console.log(`nats restart: ${rig.summary(report)}, nats kills ${RESTARTS}, ${Date.now() - started} ms`);
      expect(report.violations).toEqual([]);
      expect(rig.stats.settled).toBe(CALLS);
    },
    size(170_000, 900_000),
  );
});
