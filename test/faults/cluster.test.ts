import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startNatsCluster, type NatsCluster } from "../../src/nats/nats-cluster.js";
import { EXECUTION_BUCKETS, STREAMS } from "../../src/streams/names.js";
import { FaultRig, size } from "./rig.js";
import { until } from "../helpers/until.js";

const ASSIGNMENTS = `KV_${EXECUTION_BUCKETS.assignments}`;

/** Runs of six tool calls, three at a time; every tenth run cancelled while its second three are in flight. */
const RUNS = size(12, 180);
const PLAN = { runs: RUNS, concurrentRuns: size(6, 20), callsPerRun: 6, batch: 3, cancelRate: 0.1, writeShare: 0.6 };

describe("a 3-node cluster with R3 streams and KV: the receipts and KV leaders SIGKILLed under load, then brought back", () => {
  let cluster: NatsCluster;
  let rig: FaultRig;
  let nc: NatsConnection;

  beforeAll(async () => {
    cluster = await startNatsCluster();
    // Everyone connects with all three URLs; the gateways apply streams/ with replicas 3.
    rig = new FaultRig(() => cluster.url, { TOOLGATE_STREAM_REPLICAS: "3" });
    await rig.startGateway();
    await rig.startGateway();
    await rig.seed();
    nc = await connect({ servers: [...cluster.urls], maxReconnectAttempts: -1 });
  }, 120_000);
  afterAll(async () => {
    await nc?.close();
    await rig?.close();
    await cluster?.stop();
  });

  it(
    `${RUNS} runs with parallel calls and cancels racing 'accepted', two leaders killed and restarted: zero lost receipts, the checker passes`,
    async () => {
      const started = Date.now();
      const jsm = await jetstreamManager(nc);
      expect((await jsm.streams.info(STREAMS.receipts)).config.num_replicas).toBe(3);
      expect((await jsm.streams.info(ASSIGNMENTS)).config.num_replicas).toBe(3);

      rig.startExecutors(4, { HANDLER_WORK_MS: "50" });
      // Parallel calls append to one run and cancels race executors' `accepted` on one assignment: both
      // are compare-and-set races on one KV key, which a replicated bucket decides atomically from
      // nats-server 2.9.21 on (startNatsCluster refuses older servers; docs/reliability.md).
      const load = rig.drive(PLAN);
      const expected = PLAN.runs * PLAN.callsPerRun;
      const kills: string[] = [];
      // The receipts stream's leader first, then the leader of the assignments bucket (often another node).
      for (const [stream, share] of [
        [STREAMS.receipts, 1 / 4],
        [ASSIGNMENTS, 1 / 2],
      ] as const) {
        await until(`${Math.round(share * 100)}% of the load settled`, () => (rig.stats.settled >= expected * share ? true : undefined), 300_000);
        const leader = (await jsm.streams.info(stream)).cluster?.leader;
        const victim = cluster.nodes.find((_, i) => `n${i + 1}` === leader) ?? cluster.nodes[0]!;
        await victim.kill();
        const killedAt = rig.stats.settled;
        kills.push(`${stream} leader ${leader} at ${killedAt} settled`);
        await until(
          "the load moving on without the node",
          () => (rig.stats.settled >= Math.min(expected * 0.9, killedAt + expected / 8) ? true : undefined),
          300_000,
        );
        await victim.restart();
      }
      await load;
      const report = await rig.check();
      console.log(`cluster: ${rig.summary(report)}; killed ${kills.join(", ")}; ${Date.now() - started} ms`);
      expect(report.violations).toEqual([]);
      expect(rig.stats.cancelled).toBe(Math.floor(PLAN.runs / 10));
      // A run cancelled mid-way makes fewer calls: every call made is settled.
      expect(rig.stats.settled).toBe(rig.stats.calls);
    },
    size(300_000, 1_200_000),
  );
});
