/**
 * The processes of the `toolgate-floor` system: toolgate's messages and writes for one read tool call,
 * in toolgate's order and at its sizes, with none of its work. What it measures is what the engine,
 * the client library and the hops between four processes cost for toolgate's traffic on this
 * machine: the floor under any gateway that keeps toolgate's message design.
 *
 *   node --import tsx bench/lib/systems/toolgate-floor-process.ts gateway|workers|producer
 *
 * A call, as toolgate makes it (bench/lib/systems/toolgate-floor.ts lists the writes):
 * - producer: `POST /calls` over keep-alive HTTP; done when the completed record reaches its watch of
 *   the assignments bucket.
 * - gateway: the creation's watch and the assignment written together, the candidate published
 *   beside them without a PubAck; once the assignment is written, the run lists the call (a
 *   compare-and-set), then the HTTP answer.
 * - executor: takes the candidate from the work queue and acknowledges it, asks the gateway for the
 *   claim; the gateway's compare-and-set claims the assignment, then the grant answers.
 * - executor: the read's receipts as one message into the receipts stream (no PubAck: the answer
 *   confirms it); the gateway takes it from its consumer, settles the assignment (a compare-and-set
 *   carrying the projection), then publishes the run's event, answers the executor and erases the
 *   watch.
 * Every payload is bytes of the size toolgate sends there (bench/lib/systems/toolgate-floor.ts): no
 * encoding, decoding, validation, digest or projection anywhere.
 *
 * Environment: NATS_URL; BENCH_GATEWAY_PORT (gateway, producer); BENCH_FLOOR_DROP (parts of the design
 * left out, to measure what each costs: see `FLOOR_PARTS`).
 */
import { createServer, Agent, request } from "node:http";
import { connect, headers, type NatsConnection } from "@nats-io/transport-node";
import { jetstream } from "@nats-io/jetstream";
import { Kvm, KvWatchInclude, type KV } from "@nats-io/kv";
import { closedLoop, serveLevels } from "../closed-loop.js";
import { CompletionWatch } from "../completion-watch.js";
import { BENCH_COMPLETION_CONNECTION } from "../nats-traffic.js";
import { CONCURRENCY_EACH, WORKERS, forEachBounded } from "../workload.js";
import { FLOOR, FLOOR_BYTES, floorDrops, type FloorPayload } from "./toolgate-floor.js";

const natsUrl = process.env.NATS_URL!;
const port = Number(process.env.BENCH_GATEWAY_PORT);
/** Tool calls per run, as the toolgate producer makes them. */
const CALLS_PER_RUN = 10;
const CALL_TIMEOUT_MS = 30_000;
const drops = floorDrops();

/** Bytes of toolgate's size for `what`; the first byte tells the producer's watch a completed record. */
function payload(what: FloorPayload): Uint8Array {
  const bytes = new Uint8Array(FLOOR_BYTES[what]).fill(0x61);
  bytes[0] = what === "completed" ? FLOOR.completedMark : 0;
  return bytes;
}

const connectAs = (name: string): Promise<NatsConnection> => connect({ servers: natsUrl, name, noAsyncTraces: true });

async function gateway(): Promise<void> {
  const nc = await connectAs("bench-gateway-floor");
  const js = jetstream(nc);
  const kvm = new Kvm(nc);
  const assignments: KV = await kvm.open(FLOOR.assignments);
  const runs: KV = await kvm.open(FLOOR.runs);
  const bytes = {
    watch: payload("watch"),
    created: payload("created"),
    claimed: payload("claimed"),
    completed: payload("completed"),
    run: payload("run"),
    candidate: payload("candidate"),
    grant: payload("grant"),
    event: payload("event"),
    answer: payload("answer"),
    response: payload("response"),
  };
  /** The answer to a call's creation: its id first, padded to the size of toolgate's answer. */
  const answerOf = (id: string) => Buffer.concat([Buffer.from(`${id} `), bytes.response.subarray(id.length + 1)]);
  /** Each assignment's revision as this process wrote it (toolgate's revision cache), and its run. */
  const revisions = new Map<string, Promise<number>>();
  const runOf = new Map<string, string>();
  const runRevisions = new Map<string, number>();
  let next = 0;

  const list = async (run: string): Promise<void> => {
    const known = runRevisions.get(run);
    runRevisions.set(run, known === undefined ? await runs.create(run, bytes.run) : await runs.update(run, bytes.run, known));
  };
  const create = async (run: string): Promise<string> => {
    const id = `asg_${process.pid}_${next++}`;
    runOf.set(id, run);
    const watched = drops.has("watch") ? undefined : assignments.put(`w.${id}`, bytes.watch);
    const written = assignments.create(id, bytes.created);
    revisions.set(id, written);
    nc.publish(`${FLOOR.candidateSubject}.${id}`, bytes.candidate);
    await Promise.all([watched, written]);
    if (!drops.has("listing")) await list(run);
    return id;
  };

  const server = createServer((req, res) => {
    const run = req.url!.slice("/calls/".length);
    req.resume();
    req.on("end", () => {
      create(run).then(
        (id) => res.writeHead(201, { "content-type": "text/plain" }).end(answerOf(id)),
        (err: unknown) => res.writeHead(500).end(String(err)),
      );
    });
  });

  // Without HTTP, the call is made by a NATS request, answered as the HTTP request is.
  nc.subscribe(`${FLOOR.createSubject}.*`, {
    queue: "gateway",
    callback: (_err, msg) => {
      create(msg.subject.slice(FLOOR.createSubject.length + 1)).then(
        (id) => msg.respond(answerOf(id)),
        (err: unknown) => process.stderr.write(`create failed: ${String(err)}\n`),
      );
    },
  });

  nc.subscribe(`${FLOOR.claimSubject}.*`, {
    queue: "gateway",
    callback: (_err, msg) => {
      const id = msg.subject.slice(FLOOR.claimSubject.length + 1);
      void (async () => {
        const claimed = assignments.update(id, bytes.claimed, await revisions.get(id)!);
        revisions.set(id, claimed);
        await claimed;
        msg.respond(bytes.grant);
      })();
    },
  });

  const receipts = await (await js.consumers.get(FLOOR.receipts, FLOOR.receiptConsumer)).consume({ max_messages: 128 });
  const settling = forEachBounded(
    receipts,
    64,
    async (m) => {
      const [, , executor, id] = m.subject.split(".") as [string, string, string, string];
      const revision = await revisions.get(id)!;
      await assignments.update(id, bytes.completed, revision);
      nc.publish(`${FLOOR.eventSubject}.${runOf.get(id)}`, bytes.event);
      nc.publish(`${FLOOR.answerSubject}.${executor}.${id}`, bytes.answer);
      if (!drops.has("watch")) nc.publish(`$JS.API.STREAM.PURGE.KV_${FLOOR.assignments}`, JSON.stringify({ filter: `$KV.${FLOOR.assignments}.w.${id}` }));
      revisions.delete(id);
      runOf.delete(id);
      m.ack();
    },
    (err) => process.stderr.write(`settle failed: ${String(err)}\n`),
  );

  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  process.once("SIGTERM", () => {
    server.close();
    void receipts
      .close()
      .then(() => settling)
      .then(() => nc.drain())
      .finally(() => process.exit(0));
  });
  process.stdout.write("ready\n");
}

async function workers(): Promise<void> {
  const claim = payload("claim");
  const chain = payload("chain");
  const stops = await Promise.all(
    Array.from({ length: WORKERS }, async (_, i) => {
      const executor = `floor-${i}`;
      const nc = await connectAs(`bench-executor-floor-${i}`);
      const answered = new Map<string, () => void>();
      nc.subscribe(`${FLOOR.answerSubject}.${executor}.*`, {
        callback: (_err, msg) => {
          const id = msg.subject.slice(msg.subject.lastIndexOf(".") + 1);
          answered.get(id)?.();
          answered.delete(id);
        },
      });
      const candidates = await (await jetstream(nc).consumers.get(FLOOR.candidates, FLOOR.candidateConsumer)).consume({ max_messages: CONCURRENCY_EACH });
      const work = forEachBounded(
        candidates,
        CONCURRENCY_EACH,
        async (m) => {
          const id = m.subject.slice(FLOOR.candidateSubject.length + 1);
          m.ack();
          await nc.request(`${FLOOR.claimSubject}.${id}`, claim, { timeout: CALL_TIMEOUT_MS });
          const answer = new Promise<void>((resolve) => answered.set(id, resolve));
          const h = headers();
          h.set("Nats-Msg-Id", `${id}_chain`);
          nc.publish(`${FLOOR.receiptSubject}.${executor}.${id}`, chain, { headers: h });
          await answer;
        },
        (err) => process.stderr.write(`call failed: ${String(err)}\n`),
      );
      return async () => {
        await candidates.close();
        await work;
        await nc.drain();
      };
    }),
  );
  process.once("SIGTERM", () => void Promise.all(stops.map((stop) => stop())).finally(() => process.exit(0)));
  process.stdout.write("ready\n");
}

async function producer(): Promise<void> {
  const agent = new Agent({ keepAlive: true, maxSockets: 256 });
  const body = JSON.stringify({ tool_name: "bench.read", arguments: { query: "bench", limit: 10 } });
  /** Makes a call; resolves with its assignment id. */
  const post = (path: string): Promise<string> =>
    new Promise((resolve, reject) => {
      const req = request(
        {
          hostname: "127.0.0.1",
          port,
          path,
          method: "POST",
          agent,
          headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) },
        },
        (res) => {
          let text = "";
          res.setEncoding("latin1");
          res.on("data", (chunk: string) => (text += chunk));
          res.on("end", () => (res.statusCode === 201 ? resolve(text.slice(0, text.indexOf(" "))) : reject(new Error(`HTTP ${res.statusCode}: ${text}`))));
        },
      );
      req.on("error", reject);
      req.end(body);
    });

  // The completion watch, as the toolgate producer's.
  const nc = await connect({ servers: natsUrl, name: BENCH_COMPLETION_CONNECTION });
  const watch = await (await new Kvm(nc).open(FLOOR.assignments)).watch({ include: KvWatchInclude.UpdatesOnly });
  const completions = new CompletionWatch(CALL_TIMEOUT_MS);
  void (async () => {
    for await (const e of watch) if (e.operation === "PUT" && e.value[0] === FLOOR.completedMark) completions.arrived(e.key);
  })();
  // Without HTTP: the call as a NATS request on a connection of the producer's own.
  const calls = drops.has("http") ? await connectAs("bench-producer-floor") : undefined;
  const call = calls
    ? async (run: string) => {
        const text = Buffer.from((await calls.request(`${FLOOR.createSubject}.${run}`, body, { timeout: CALL_TIMEOUT_MS })).data).toString("latin1");
        return text.slice(0, text.indexOf(" "));
      }
    : (run: string) => post(`/calls/${run}`);
  const callers = new Map<number, { run: string; used: number }>();
  let runs = 0;
  serveLevels(
    (command) =>
      closedLoop(command, async (caller) => {
        let state = callers.get(caller);
        if (!state || state.used === CALLS_PER_RUN) callers.set(caller, (state = { run: `run_${process.pid}_${runs++}`, used: 0 }));
        state.used++;
        await completions.done(await call(state.run));
      }),
    async () => {
      watch.stop();
      await nc.close();
      await calls?.close();
      agent.destroy();
    },
  );
}

if (process.argv[2] === "gateway") await gateway();
else if (process.argv[2] === "workers") await workers();
else if (process.argv[2] === "producer") await producer();
