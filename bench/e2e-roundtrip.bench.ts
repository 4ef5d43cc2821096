/**
 * End-to-end round trip of one tool call through one gateway: HTTP create -> candidate -> claim ->
 * grant -> accepted -> completed -> visible in history. Spawns its own nats-server; the executors
 * speak the wire protocol directly (test/helpers/protocol-executor.ts).
 *
 *   npx tsx bench/e2e-roundtrip.bench.ts            # defaults: 300 sequential, 1,000 at 10 concurrent
 *   CALLS=2000 CONCURRENCY=32 npx tsx bench/e2e-roundtrip.bench.ts
 *
 * Latency is measured from the POST to the executor's `completed` being answered `recorded`, then
 * checked by a GET of the assignment showing it completed with its projection (included). Each
 * concurrent worker drives its own run, as agent runtimes do.
 */
import { connect } from "@nats-io/transport-node";
import { jetstream } from "@nats-io/jetstream";
import { startNatsServer } from "../src/nats/nats-server-process.js";
import { decode } from "../src/wire/codec.js";
import { Candidate } from "../src/wire/messages.js";
import { STREAMS, candidateConsumer } from "../src/wire/subjects.js";
import { seedSession, startExecutionGateway } from "../test/helpers/execution-gateway.js";
import { ProtocolExecutor } from "../test/helpers/protocol-executor.js";

const SEQUENTIAL = Number(process.env.SEQUENTIAL ?? 300);
const CALLS = Number(process.env.CALLS ?? 1_000);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 10);
const SCOPE = "bench";

const nats = await startNatsServer();
const gw = await startExecutionGateway(nats.url);
const sessionId = await seedSession(gw.gateway.store, { scope: SCOPE, agent: "bench-bot", tools: [{ name: "bench.echo", binding_id: "b-bench", tool_kind: "write" }] });
const nc = await connect({ servers: nats.url });
const executors = [0, 1].map((i) => new ProtocolExecutor(nc, SCOPE, `bench-${i}`, ["b-bench"]));
for (const e of executors) await e.heartbeat();

// Executors: a continuous pull on the scope's consumer, each candidate claimed and completed at once.
const done = new Map<string, () => void>();
const consumer = await jetstream(nc).consumers.get(STREAMS.candidates, candidateConsumer(SCOPE));
const messages = await consumer.consume({ max_messages: 256 });
let turn = 0;
const serving = (async () => {
  for await (const m of messages) {
    m.ack();
    const exec = executors[turn++ % executors.length]!;
    const c = decode(Candidate, m.data);
    void (async () => {
      const reply = await exec.claim(c.assignment_id, c.generation);
      if (reply.status !== "granted") return;
      const g = reply.grant;
      await exec.send(exec.accepted(g));
      const answer = await exec.send(exec.receipt(g, { kind: "completed", result: { echo: g.arguments } }));
      if (answer.status === "recorded") done.get(g.assignment_id)?.();
    })();
  }
})();
const heartbeat = setInterval(() => executors.forEach((e) => void e.heartbeat()), 3_000);

async function oneCall(runId: string, i: number): Promise<number> {
  const t0 = performance.now();
  const created = await gw.http("POST", `/v1/runs/${runId}/tool-calls`, { tool_name: "bench.echo", arguments: { i } });
  if (created.status !== 201) throw new Error(JSON.stringify(created.body));
  const id: string = created.body.assignment.assignment_id;
  await new Promise<void>((resolve) => {
    done.set(id, resolve);
  });
  done.delete(id);
  const history = await gw.http("GET", `/v1/assignments/${id}`);
  if (history.body.state !== "completed" || !history.body.context_preview) throw new Error(`not completed: ${id}`);
  return performance.now() - t0;
}

const pct = (xs: number[], p: number) => xs.slice().sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;
async function phase(label: string, calls: number, concurrency: number): Promise<void> {
  const latencies: number[] = [];
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      const runId = (await gw.http("POST", `/v1/sessions/${sessionId}/runs`)).body.run_id as string;
      for (let i = next++; i < calls; i = next++) latencies.push(await oneCall(runId, i));
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  console.log(
    `${label.padEnd(16)} calls=${calls} concurrency=${concurrency}  p50=${pct(latencies, 50).toFixed(1)} ms  p99=${pct(latencies, 99).toFixed(1)} ms  throughput=${(calls / seconds).toFixed(0)} calls/s`,
  );
}

try {
  await phase("warm-up", 50, 4);
  await phase("sequential", SEQUENTIAL, 1);
  await phase("concurrent", CALLS, CONCURRENCY);
} finally {
  clearInterval(heartbeat);
  await messages.close();
  await serving;
  for (const e of executors) e.close();
  await nc.close();
  await gw.close();
  await nats.stop();
}
