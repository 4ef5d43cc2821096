import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { connect } from "@nats-io/transport-node";
import { jetstreamManager, StorageType } from "@nats-io/jetstream";
import { startNatsServer, type NatsServerProcess } from "./nats-server-process.js";
import { judgeServer, serverFacts, UnsupportedServerError } from "./server-version.js";

/** A local nats-server cluster: each node its own process, client port, route port and store dir. */
export interface NatsCluster {
  readonly nodes: readonly NatsServerProcess[];
  /** Every node's client URL, comma-separated (what NATS_URL takes). */
  readonly url: string;
  readonly urls: readonly string[];
  /** Resolves once JetStream answers through `servers` and can place a stream on every node. */
  waitForJetStream(timeoutMs?: number): Promise<void>;
  /** Stops every node and removes the store dirs. */
  stop(): Promise<void>;
}

/** A free TCP port on 127.0.0.1 (routes must be known before any node starts). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

/** Formations `startNatsCluster` tries before it gives up: on a loaded machine one can stall. */
const FORMATION_ATTEMPTS = 2;

/**
 * Starts `size` (default 3) clustered JetStream nodes on 127.0.0.1, random client and route ports,
 * each routed to all others, and waits until JetStream can place a stream on every node. A formation
 * that stalls (seen once on a loaded 2-core machine: "no suitable peers for placement" for 30 s) is
 * stopped and started afresh once; the error then carries each node's latest log. A node can be
 * killed and restarted (same ports, same store) through its `NatsServerProcess`.
 */
export async function startNatsCluster(options: { size?: number; name?: string } = {}): Promise<NatsCluster> {
  for (let attempt = 1; ; attempt++) {
    const cluster = await launchCluster(options.size ?? 3, options.name ?? "toolgate");
    try {
      await cluster.waitForJetStream();
    } catch (err) {
      const logs = cluster.nodes.map((n, i) => `--- n${i + 1} (${n.url}), latest log:\n${n.recentLog().split("\n").slice(-15).join("\n")}`).join("\n");
      await cluster.stop();
      if (attempt >= FORMATION_ATTEMPTS) throw new Error(`${String(err)} (after ${attempt} formations)\n${logs}`, { cause: err });
      process.emitWarning(`nats cluster formation ${attempt} stalled, starting a fresh one: ${String(err)}\n${logs}`);
      continue;
    }
    await refuseWithoutAtomicCompareAndSet(cluster);
    return cluster;
  }
}

async function launchCluster(size: number, name: string): Promise<NatsCluster> {
  const root = mkdtempSync(join(tmpdir(), "toolgate-cluster-"));
  const routePorts: number[] = [];
  for (let i = 0; i < size; i++) routePorts.push(await freePort());
  const route = (p: number) => `nats://127.0.0.1:${p}`;
  const nodes = await Promise.all(
    routePorts.map((port, i) =>
      startNatsServer({
        storeDir: join(root, `n${i + 1}`),
        args: [
          "--name",
          `n${i + 1}`,
          "--cluster_name",
          name,
          "--cluster",
          route(port),
          "--routes",
          routePorts
            .filter((p) => p !== port)
            .map(route)
            .join(","),
        ],
      }),
    ),
  );
  const cluster: NatsCluster = {
    nodes,
    get urls() {
      return nodes.map((n) => n.url);
    },
    get url() {
      return nodes.map((n) => n.url).join(",");
    },
    async waitForJetStream(timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      const nc = await connect({ servers: cluster.urls as string[] });
      try {
        for (;;) {
          try {
            const jsm = await jetstreamManager(nc, { timeout: 2_000 });
            // A meta leader is not enough: a stream replicated on every node can be placed only once
            // every node's JetStream has joined ("no suitable peers for placement" until then).
            const probe = `toolgate_ready_${process.pid}_${Date.now()}`;
            await jsm.streams.add({ name: probe, subjects: [`_toolgate.ready.${probe}`], num_replicas: nodes.length, storage: StorageType.Memory });
            await jsm.streams.delete(probe);
            return;
          } catch (err) {
            if (Date.now() > deadline) throw new Error(`JetStream of the cluster did not answer within ${timeoutMs} ms: ${String(err)}`, { cause: err });
            await delay(250);
          }
        }
      } finally {
        await nc.close();
      }
    },
    async stop() {
      await Promise.all(nodes.map((n) => n.stop({ removeStore: false })));
      rmSync(root, { recursive: true, force: true });
    },
  };
  return cluster;
}

/** A cluster of servers whose replicated compare-and-set is not atomic is of no use to toolgate: stop early, saying why. */
async function refuseWithoutAtomicCompareAndSet(cluster: NatsCluster): Promise<void> {
  const nc = await connect({ servers: cluster.urls as string[] });
  const refusal = judgeServer(serverFacts(nc), { replicas: cluster.nodes.length }).refusal;
  await nc.close();
  if (refusal) {
    await cluster.stop();
    throw new UnsupportedServerError(refusal);
  }
}
