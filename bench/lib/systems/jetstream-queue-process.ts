/**
 * The processes of the raw JetStream peer, the engine's own floor for durable dispatch: a work-queue
 * stream of calls and a stream of results, 2 persisted writes per call.
 *
 *   node --import tsx bench/lib/systems/jetstream-queue-process.ts producer|workers
 *
 * producer: publishes each call to the work queue (awaiting its PubAck: stored) and waits for its
 * result on the result subject. workers: 4 connections pulling from one durable consumer, 32 calls
 * at once each; a call's result is published to the result stream (PubAck awaited) before the call
 * is acknowledged, which removes it from the work queue. Environment: NATS_URL.
 */
import { connect } from "@nats-io/transport-node";
import { jetstream } from "@nats-io/jetstream";
import { closedLoop, serveLevels } from "../closed-loop.js";
import { BENCH_ARGUMENTS, BENCH_RESULT, BENCH_TOOL } from "../protocol-messages.js";
import { CONCURRENCY_EACH, WORKERS, forEachBounded, readyUntilStopped } from "../workload.js";
import { JETSTREAM_QUEUE } from "./jetstream-queue.js";

interface Call {
  id: number;
  reply: string;
  tool: string;
  arguments: unknown;
}

const natsUrl = process.env.NATS_URL!;
const CALL_TIMEOUT_MS = 30_000;

async function producer(): Promise<void> {
  const nc = await connect({ servers: natsUrl, name: "bench-producer", noAsyncTraces: true }); // as toolgate's own connections
  const js = jetstream(nc);
  const reply = `bench.results.${process.pid}`;
  const waiting = new Map<number, () => void>();
  nc.subscribe(reply, {
    callback: (_err, msg) => {
      const { id } = msg.json<{ id: number }>();
      waiting.get(id)?.();
      waiting.delete(id);
    },
  });
  let next = 0;
  serveLevels(
    (command) =>
      closedLoop(command, async () => {
        const call: Call = { id: next++, reply, tool: BENCH_TOOL.name, arguments: BENCH_ARGUMENTS };
        const done = new Promise<void>((resolve, reject) => {
          const timer = setTimeout(() => reject(new Error(`no result for call ${call.id} within ${CALL_TIMEOUT_MS} ms`)), CALL_TIMEOUT_MS);
          waiting.set(call.id, () => {
            clearTimeout(timer);
            resolve();
          });
        });
        await js.publish(JETSTREAM_QUEUE.callSubject, JSON.stringify(call));
        await done;
      }),
    () => nc.drain(),
  );
}

async function workers(): Promise<void> {
  const stops = await Promise.all(
    Array.from({ length: WORKERS }, async (_, i) => {
      const nc = await connect({ servers: natsUrl, name: `bench-worker-jetstream-${i}`, noAsyncTraces: true });
      const js = jetstream(nc);
      const messages = await (await js.consumers.get(JETSTREAM_QUEUE.calls, JETSTREAM_QUEUE.consumer)).consume({ max_messages: CONCURRENCY_EACH });
      const work = forEachBounded(
        messages,
        CONCURRENCY_EACH,
        async (m) => {
          const call = m.json<Call>();
          await js.publish(call.reply, JSON.stringify({ id: call.id, result: BENCH_RESULT }));
          m.ack();
        },
        (err) => process.stderr.write(`call failed: ${String(err)}\n`),
      );
      return async () => {
        await messages.close();
        await work;
        await nc.drain();
      };
    }),
  );
  readyUntilStopped(() => Promise.all(stops.map((stop) => stop())));
}

if (process.argv[2] === "producer") await producer();
else if (process.argv[2] === "workers") await workers();
