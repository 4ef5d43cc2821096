/**
 * The processes of the BullMQ peer, on the machine's Redis (127.0.0.1, BENCH_REDIS_PORT or 6379),
 * under a queue prefix of this run alone (BENCH_BULLMQ_PREFIX).
 *
 *   node --import tsx bench/lib/systems/bullmq-process.ts producer|workers
 *
 * producer: `queue.add` then `job.waitUntilFinished(queueEvents)` per call, the request/response way
 * BullMQ documents; only the last 1,000 finished jobs are kept (`removeOnComplete: { count }`), as a
 * long-running deployment sets it (`true` would remove a job before `waitUntilFinished` looks at it). workers: 4 `Worker`s of concurrency 32 each, answering with the result.
 */
import { Redis } from "ioredis";
import { Queue, QueueEvents, Worker } from "bullmq";
import { closedLoop, serveLevels } from "../closed-loop.js";
import { BENCH_ARGUMENTS, BENCH_RESULT, BENCH_TOOL } from "../protocol-messages.js";
import { CONCURRENCY_EACH, WORKERS, readyUntilStopped } from "../workload.js";
import { BULLMQ_QUEUE, redisPort } from "./bullmq.js";

const prefix = process.env.BENCH_BULLMQ_PREFIX!;
/** BullMQ takes an ioredis instance in an ES module (it cannot `require` one itself); its blocking calls need no retry cap. */
const KEEP_LAST = { removeOnComplete: { count: 1_000 }, removeOnFail: { count: 1_000 } };
const connection = () => new Redis({ host: "127.0.0.1", port: redisPort(), maxRetriesPerRequest: null });

async function producer(): Promise<void> {
  const queue = new Queue(BULLMQ_QUEUE, { connection: connection(), prefix });
  const events = new QueueEvents(BULLMQ_QUEUE, { connection: connection(), prefix });
  await Promise.all([queue.waitUntilReady(), events.waitUntilReady()]);
  serveLevels(
    (command) =>
      closedLoop(command, async () => {
        const job = await queue.add(BENCH_TOOL.name, BENCH_ARGUMENTS, KEEP_LAST);
        await job.waitUntilFinished(events, 30_000);
      }),
    async () => {
      await events.close();
      await queue.close();
    },
  );
}

async function workers(): Promise<void> {
  const all = Array.from(
    { length: WORKERS },
    () => new Worker(BULLMQ_QUEUE, async () => BENCH_RESULT, { connection: connection(), prefix, concurrency: CONCURRENCY_EACH }),
  );
  await Promise.all(all.map((w) => w.waitUntilReady()));
  readyUntilStopped(() => Promise.all(all.map((w) => w.close())));
}

if (process.argv[2] === "producer") await producer();
else if (process.argv[2] === "workers") await workers();
