/**
 * The executors of `bench:e2e`, in their own process (so their event loop, SQLite commits included,
 * never delays the driver's clock or the gateway's): `node --import tsx bench/lib/e2e-executor.ts`.
 *
 * Environment: NATS_URL; BENCH_EXECUTOR `runner` (the real ToolRunner, SQLite store in BENCH_DIR) or
 * `protocol` (the protocol-level test executor: the same messages without the SDK, to separate SDK
 * cost from gateway cost); BENCH_EXECUTORS executors of BENCH_MAX_CONCURRENT claims each.
 * Prints `ready` on stdout once every executor is online; stops on SIGTERM.
 */
import { join } from "node:path";
import { connect } from "@nats-io/transport-node";
import { jetstream } from "@nats-io/jetstream";
import { pino } from "pino";
import { ToolRunner } from "../../src/runner/index.js";
import { decode } from "../../src/wire/codec.js";
import { Candidate } from "../../src/wire/messages.js";
import { EXECUTOR_JS_API_PREFIX } from "../../src/wire/subjects.js";
import { registerExecutor } from "../../test/helpers/registry.js";
import { ProtocolExecutor } from "../../test/helpers/protocol-executor.js";
import { BENCH_PROGRESS, BENCH_RESULT, BENCH_TOOL } from "./protocol-messages.js";
import { forEachBounded } from "./workload.js";
import { candidateConsumer, STREAMS } from "../../src/streams/names.js";

const env = (name: string): string => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};
const natsUrl = env("NATS_URL");
const executors = Number(env("BENCH_EXECUTORS"));
const maxConcurrent = Number(env("BENCH_MAX_CONCURRENT"));
const logger = pino({ level: process.env.BENCH_EXECUTOR_LOG ?? "warn" }, pino.destination(2));

async function startRunners(): Promise<() => Promise<void>> {
  const dir = env("BENCH_DIR");
  const id = (i: number) => `bench-runner-${i}`;
  // The registry grants the runners their claims (the protocol executors register themselves).
  const registry = await connect({ servers: natsUrl, name: "bench-registry" });
  for (let i = 0; i < executors; i++) await registerExecutor(registry, { executor_id: id(i), scope: BENCH_TOOL.scope, bindings: [BENCH_TOOL.bindingId] });
  await registry.close();
  const runners = await Promise.all(
    Array.from({ length: executors }, (_, i) =>
      ToolRunner.start({
        natsUrl,
        executorId: id(i),
        scope: BENCH_TOOL.scope,
        store: join(dir, `runner-${i}.db`),
        authorize: () => true,
        logger,
        maxConcurrent,
        tools: {
          [BENCH_TOOL.name]: {
            kind: "read",
            bindingId: BENCH_TOOL.bindingId,
            async handler(ctx) {
              await ctx.progress(BENCH_PROGRESS);
              return BENCH_RESULT;
            },
          },
        },
      }),
    ),
  );
  return async () => {
    await Promise.all(runners.map((r) => r.close({ deadlineMs: 2_000 })));
  };
}

/** One connection per executor; each consumes the scope's candidates and runs every call straight through. */
async function startProtocolExecutors(): Promise<() => Promise<void>> {
  const stops = await Promise.all(
    Array.from({ length: executors }, async (_, i) => {
      // noAsyncTraces: no stack trace per request, as the gateway and the ToolRunner connect (a tenth of this process's CPU).
      const nc = await connect({ servers: natsUrl, name: `bench-executor-protocol-${i}`, noAsyncTraces: true });
      const exec = new ProtocolExecutor(nc, BENCH_TOOL.scope, `bench-protocol-${i}`, [BENCH_TOOL.bindingId]);
      await exec.heartbeat();
      // Presence lives 15 s unless refreshed.
      const beat = setInterval(() => void exec.heartbeat().catch((err: unknown) => logger.warn({ err }, "heartbeat failed")), 5_000);
      // The executors' JetStream prefix, as the runner uses it (on this unsecured server the gateway forwards it).
      const consumer = await jetstream(nc, { apiPrefix: EXECUTOR_JS_API_PREFIX }).consumers.get(STREAMS.candidates, candidateConsumer(BENCH_TOOL.scope));
      const messages = await consumer.consume({ max_messages: maxConcurrent });
      // At most `maxConcurrent` calls at once, as a runner holds at most that many claims: acknowledging
      // every candidate at once would let one executor outgrow the gateway's claim bound (too_many_claims).
      const work = forEachBounded(
        messages,
        maxConcurrent,
        async (m) => {
          const candidate = decode(Candidate, m.data);
          m.ack();
          await run(exec, candidate);
        },
        (err: unknown) => logger.error({ err }, "bench call failed"),
      );
      return async () => {
        clearInterval(beat);
        await messages.close();
        await work;
        exec.close();
        await nc.drain();
      };
    }),
  );
  return async () => {
    await Promise.all(stops.map((stop) => stop()));
  };
}

async function run(exec: ProtocolExecutor, candidate: Candidate): Promise<void> {
  const { reply, ...terms } = await exec.claimWithOrder(candidate.assignment_id, candidate.generation);
  if (reply.status !== "granted") throw new Error(`claim refused: ${reply.code}`);
  const { grant } = reply;
  // Receipt ids bound to the claim, as the ToolRunner names them.
  const receipt = (body: Parameters<ProtocolExecutor["receipt"]>[1]) => exec.claimReceipt(grant, body);
  // As the ToolRunner sends them: a read's `accepted`, report and final receipt as one message where
  // the gateway takes chains, else the report right behind `accepted` (a read has no side effects to
  // hold back) and the final receipt right behind the report.
  const answers = await exec.postAsRunner(
    [
      receipt({ kind: "accepted", operation_key: grant.operation_key, argument_digest: grant.argument_digest }),
      receipt({ kind: "progress", seq: 1, progress: BENCH_PROGRESS }),
      receipt({ kind: "completed", result: BENCH_RESULT }),
    ],
    terms,
    { read: grant.tool_kind === "read" },
  );
  for (const [i, answer] of answers.entries())
    if (answer.status !== "recorded") throw new Error(`${["accepted", "progress", "completed"][i]}: ${answer.status} ${answer.code ?? ""}`);
}

const stop = process.env.BENCH_EXECUTOR === "protocol" ? await startProtocolExecutors() : await startRunners();
process.stdout.write("ready\n");
process.once("SIGTERM", () => {
  void stop().then(() => process.exit(0));
});
