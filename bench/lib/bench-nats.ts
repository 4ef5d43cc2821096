import { join } from "node:path";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import { natsServerBinary, startNatsServer, type NatsServerProcess } from "../../src/nats/nats-server-process.js";
import { executorJetStreamMappings } from "../../src/security/jsapi-bridge.js";
import { freePort } from "./child.js";
import { BENCH_DRIVER_CONNECTION, trafficTotals } from "./nats-traffic.js";
import { settledSeqs } from "./stream-writes.js";
import type { Snapshot } from "./systems/system.js";

/** The nats-server the benches run: `TOOLGATE_NATS_SERVER`, else `NATS_SERVER_BIN`, else `nats-server` on PATH. */
export function benchNatsBinary(): string {
  return process.env.TOOLGATE_NATS_SERVER ?? natsServerBinary();
}

/** A bench-owned nats-server: random client port on 127.0.0.1 (never :4222), monitoring on another, its own store. */
export interface BenchNats {
  readonly server: NatsServerProcess;
  readonly monitorUrl: string;
  /** The bench driver's connection, for stream counts (its messages are left out of the counts). */
  readonly nc: NatsConnection;
  readonly jsm: JetStreamManager;
  /** Persisted messages per stream (KV buckets are streams) once no stream moves, and messages per role. */
  snapshot(): Promise<Snapshot>;
  stop(): Promise<void>;
}

/** How many bench nats-servers serve pprof (`BENCH_NATS_PPROF`): each takes the next port. */
let pprofServers = 0;

/**
 * `BENCH_NATS_PPROF=<port>`: the servers serve Go's pprof from that port on (one port per server, in
 * the order they start; each says its own on stderr), so a CPU profile of nats-server can be taken
 * while a level runs: `go tool pprof -top 'http://127.0.0.1:<port>/debug/pprof/profile?seconds=10'`.
 */
function pprofArgs(storeDir: string): string[] {
  const base = process.env.BENCH_NATS_PPROF;
  if (!base) return [];
  if (!/^\d+$/.test(base)) throw new Error(`BENCH_NATS_PPROF=${base}: a port number (each server takes the next one)`);
  const port = Number(base) + pprofServers++;
  process.stderr.write(`bench: nats-server for ${storeDir}: pprof on http://127.0.0.1:${port}/debug/pprof/\n`);
  return ["--profile", String(port)];
}

export async function startBenchNats(storeDir: string): Promise<BenchNats> {
  const monitorPort = await freePort();
  // Configured as the embedded server is: the executors' pulls reach JetStream by the server's own mapping, as in a secured deployment.
  const server = await startNatsServer({
    storeDir: join(storeDir),
    binary: benchNatsBinary(),
    config: executorJetStreamMappings(),
    args: ["-m", String(monitorPort), ...pprofArgs(storeDir)],
  });
  const monitorUrl = `http://127.0.0.1:${monitorPort}`;
  const nc = await connect({ servers: server.url, name: BENCH_DRIVER_CONNECTION });
  const jsm = await jetstreamManager(nc);
  return {
    server,
    monitorUrl,
    nc,
    jsm,
    async snapshot() {
      const writes = new Map(await settledSeqs(jsm));
      return { writes, messages: await trafficTotals(monitorUrl) };
    },
    async stop() {
      await nc.close();
      await server.stop({ removeStore: true });
    },
  };
}
