/**
 * The processes of the core NATS request/reply peer: no persistence at all, the transport's floor.
 *
 *   node --import tsx bench/lib/systems/nats-request-process.ts producer|workers
 *
 * producer: one request per call. workers: 4 connections in one queue group, each answering with the
 * result. Environment: NATS_URL.
 */
import { connect } from "@nats-io/transport-node";
import { closedLoop, serveLevels } from "../closed-loop.js";
import { BENCH_ARGUMENTS, BENCH_RESULT, BENCH_TOOL } from "../protocol-messages.js";
import { WORKERS, readyUntilStopped } from "../workload.js";

const natsUrl = process.env.NATS_URL!;
const SUBJECT = "bench.call";

async function producer(): Promise<void> {
  const nc = await connect({ servers: natsUrl, name: "bench-producer", noAsyncTraces: true }); // as toolgate's own connections
  const payload = JSON.stringify({ tool: BENCH_TOOL.name, arguments: BENCH_ARGUMENTS });
  serveLevels(
    (command) =>
      closedLoop(command, async () => {
        await nc.request(SUBJECT, payload, { timeout: 30_000 });
      }),
    () => nc.drain(),
  );
}

async function workers(): Promise<void> {
  const result = JSON.stringify(BENCH_RESULT);
  const connections = await Promise.all(
    Array.from({ length: WORKERS }, async (_, i) => {
      const nc = await connect({ servers: natsUrl, name: `bench-worker-nats-${i}`, noAsyncTraces: true });
      nc.subscribe(SUBJECT, { queue: "workers", callback: (_err, msg) => void msg.respond(result) });
      await nc.flush();
      return nc;
    }),
  );
  readyUntilStopped(() => Promise.all(connections.map((nc) => nc.drain())));
}

if (process.argv[2] === "producer") await producer();
else if (process.argv[2] === "workers") await workers();
