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
 * encoding, decoding, validation, digest or projection anywhere. With `BENCH_FLOOR_WORK=lean` (the
 * `toolgate-lean` system) each step does instead what toolgate's guarantees need, with toolgate's own
 * functions (bench/lib/systems/toolgate-lean-work.ts), over the same messages and writes.
 *
 * Environment: NATS_URL; BENCH_GATEWAY_PORT (gateway, producer); BENCH_FLOOR_DROP (parts of the design
 * left out, to measure what each costs: see `FLOOR_PARTS`); BENCH_FLOOR_WORK (`none` or `lean`).
 */
import { timingSafeEqual } from "node:crypto";
import { createServer, Agent, request } from "node:http";
import { connect, headers, type NatsConnection } from "@nats-io/transport-node";
import { jetstream } from "@nats-io/jetstream";
import { Kvm, KvWatchInclude, type KV } from "@nats-io/kv";
import { closedLoop, serveLevels } from "../closed-loop.js";
import { CompletionWatch } from "../completion-watch.js";
import { BENCH_COMPLETION_CONNECTION } from "../nats-traffic.js";
import { CONCURRENCY_EACH, WORKERS, forEachBounded, readyUntilStopped } from "../workload.js";
import { FLOOR, FLOOR_BYTES, floorDrops, floorWork, type FloorPayload } from "./toolgate-floor.js";
import { LEAN_CALL_BODY, LeanExecutor, LeanGateway, keyDigest, leanCompleted } from "./toolgate-lean-work.js";

const natsUrl = process.env.NATS_URL!;
const port = Number(process.env.BENCH_GATEWAY_PORT);
/** Tool calls per run, as the toolgate producer makes them. */
const CALLS_PER_RUN = 10;
const CALL_TIMEOUT_MS = 30_000;
const drops = floorDrops();
const lean = floorWork() === "lean";
/** The key the producer presents; the lean gateway keeps only its digest, as toolgate's identities do. */
const API_KEY = "bench-floor-key-0123456789abcdef";

/** Bytes of toolgate's size for `what`; the first byte tells the producer's watch a completed record. */
function payload(what: FloorPayload): Uint8Array {
  const bytes = new Uint8Array(FLOOR_BYTES[what]).fill(0x61);
  bytes[0] = what === "completed" ? FLOOR.completedMark : 0;
  return bytes;
}

const connectAs = (name: string): Promise<NatsConnection> => connect({ servers: natsUrl, name, noAsyncTraces: true });

/** What the gateway writes and sends at each step of a call: bytes of toolgate's sizes, or the lean work's values. */
interface GatewayWork {
  /** The creation's writes, and its HTTP answer (built once the call is listed). */
  create(run: string, body: string): { id: string; watch: Uint8Array; record: Uint8Array; candidate: Uint8Array; answer: () => string | Uint8Array };
  list(run: string, id: string): Uint8Array;
  claim(id: string, request: Uint8Array): { record: Uint8Array; reply: Uint8Array };
  settle(id: string, chain: Uint8Array, streamSeq: number, executor: string): { record: Uint8Array; event: Uint8Array; answers: Uint8Array };
}

function floorBytes(): GatewayWork {
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
  let next = 0;
  return {
    create: () => {
      const id = `asg_${process.pid}_${next++}`;
      // The answer to a call's creation: its id first, padded to the size of toolgate's answer.
      const answer = () => Buffer.concat([Buffer.from(`${id} `), bytes.response.subarray(id.length + 1)]);
      return { id, watch: bytes.watch, record: bytes.created, candidate: bytes.candidate, answer };
    },
    list: () => bytes.run,
    claim: () => ({ record: bytes.claimed, reply: bytes.grant }),
    settle: () => ({ record: bytes.completed, event: bytes.event, answers: bytes.answer }),
  };
}

async function gateway(): Promise<void> {
  const nc = await connectAs("bench-gateway-floor");
  const js = jetstream(nc);
  const kvm = new Kvm(nc);
  const assignments: KV = await kvm.open(FLOOR.assignments);
  const runs: KV = await kvm.open(FLOOR.runs);
  const work: GatewayWork = lean ? new LeanGateway() : floorBytes();
  const key = keyDigest(API_KEY);
  /** Each assignment's revision as this process wrote it (toolgate's revision cache), and its run. */
  const revisions = new Map<string, Promise<number>>();
  const runOf = new Map<string, string>();
  const runRevisions = new Map<string, number>();

  const list = async (run: string, id: string): Promise<void> => {
    const known = runRevisions.get(run);
    const record = work.list(run, id);
    runRevisions.set(run, known === undefined ? await runs.create(run, record) : await runs.update(run, record, known));
  };
  const create = async (run: string, body: string): Promise<string | Uint8Array> => {
    const made = work.create(run, body);
    const id = made.id;
    runOf.set(id, run);
    const watched = drops.has("watch") ? undefined : assignments.put(`w.${id}`, made.watch);
    const written = assignments.create(id, made.record);
    revisions.set(id, written);
    nc.publish(`${FLOOR.candidateSubject}.${id}`, made.candidate);
    await Promise.all([watched, written]);
    if (!drops.has("listing")) await list(run, id);
    return made.answer();
  };
  /** The lean gateway checks the caller's key as toolgate's identities do (its digest, compared in constant time). */
  const authorized = (header: string | undefined): boolean =>
    !lean || (header !== undefined && timingSafeEqual(keyDigest(header.slice("Bearer ".length)), key));

  const server = createServer((req, res) => {
    const run = req.url!.slice("/calls/".length);
    let body = "";
    // The floor reads nothing of the request; the lean gateway parses it.
    if (lean) req.setEncoding("utf8").on("data", (chunk: string) => (body += chunk));
    else req.resume();
    req.on("end", () => {
      if (!authorized(req.headers.authorization)) return void res.writeHead(401).end();
      create(run, body).then(
        (answer) => res.writeHead(201, { "content-type": lean ? "application/json" : "text/plain" }).end(answer),
        (err: unknown) => res.writeHead(500).end(String(err)),
      );
    });
  });

  // Without HTTP, the call is made by a NATS request, answered as the HTTP request is.
  nc.subscribe(`${FLOOR.createSubject}.*`, {
    queue: "gateway",
    callback: (_err, msg) => {
      create(msg.subject.slice(FLOOR.createSubject.length + 1), msg.string()).then(
        (answer) => msg.respond(answer),
        (err: unknown) => process.stderr.write(`create failed: ${String(err)}\n`),
      );
    },
  });

  nc.subscribe(`${FLOOR.claimSubject}.*`, {
    queue: "gateway",
    callback: (_err, msg) => {
      const id = msg.subject.slice(FLOOR.claimSubject.length + 1);
      void (async () => {
        const known = await revisions.get(id)!;
        const granted = work.claim(id, msg.data);
        const claimed = assignments.update(id, granted.record, known);
        revisions.set(id, claimed);
        await claimed;
        msg.respond(granted.reply);
      })().catch((err: unknown) => process.stderr.write(`claim failed: ${String(err)}\n`));
    },
  });

  const receipts = await (await js.consumers.get(FLOOR.receipts, FLOOR.receiptConsumer)).consume({ max_messages: 128 });
  const settling = forEachBounded(
    receipts,
    64,
    async (m) => {
      const [, , executor, id] = m.subject.split(".") as [string, string, string, string];
      const revision = await revisions.get(id)!;
      const settled = work.settle(id, m.data, m.seq, executor);
      await assignments.update(id, settled.record, revision);
      nc.publish(`${FLOOR.eventSubject}.${runOf.get(id)}`, settled.event);
      nc.publish(`${FLOOR.answerSubject}.${executor}.${id}`, settled.answers);
      if (!drops.has("watch")) nc.publish(`$JS.API.STREAM.PURGE.KV_${FLOOR.assignments}`, JSON.stringify({ filter: `$KV.${FLOOR.assignments}.w.${id}` }));
      revisions.delete(id);
      runOf.delete(id);
      m.ack();
    },
    (err) => process.stderr.write(`settle failed: ${String(err)}\n`),
  );

  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  readyUntilStopped(async () => {
    server.close();
    await receipts.close();
    await settling;
    await nc.drain();
  });
}

/** What an executor sends and checks: bytes of toolgate's sizes, or the lean work's values. */
interface ExecutorWork {
  claimRequest(candidate: { subject: string; data: Uint8Array }): { id: string; request: Uint8Array };
  chain(reply: Uint8Array, id: string): { message: Uint8Array; firstId: string };
  answered(answers: Uint8Array): void;
}

function executorWork(executor: string): ExecutorWork {
  if (lean) {
    const work = new LeanExecutor(executor);
    return { claimRequest: (c) => work.claimRequest(c.data), chain: (reply) => work.chain(reply), answered: (answers) => work.answered(answers) };
  }
  const claim = payload("claim");
  const chain = payload("chain");
  return {
    claimRequest: (c) => ({ id: c.subject.slice(FLOOR.candidateSubject.length + 1), request: claim }),
    chain: (_reply, id) => ({ message: chain, firstId: `${id}_chain` }),
    answered: () => {},
  };
}

async function workers(): Promise<void> {
  const stops = await Promise.all(
    Array.from({ length: WORKERS }, async (_, i) => {
      const executor = `floor-${i}`;
      const steps = executorWork(executor);
      const nc = await connectAs(`bench-executor-floor-${i}`);
      const answered = new Map<string, (answers: Uint8Array) => void>();
      nc.subscribe(`${FLOOR.answerSubject}.${executor}.*`, {
        callback: (_err, msg) => {
          const id = msg.subject.slice(msg.subject.lastIndexOf(".") + 1);
          answered.get(id)?.(msg.data);
          answered.delete(id);
        },
      });
      const candidates = await (await jetstream(nc).consumers.get(FLOOR.candidates, FLOOR.candidateConsumer)).consume({ max_messages: CONCURRENCY_EACH });
      const work = forEachBounded(
        candidates,
        CONCURRENCY_EACH,
        async (m) => {
          const { id, request } = steps.claimRequest(m);
          m.ack();
          const reply = await nc.request(`${FLOOR.claimSubject}.${id}`, request, { timeout: CALL_TIMEOUT_MS });
          const { message, firstId } = steps.chain(reply.data, id);
          const answer = new Promise<Uint8Array>((resolve) => answered.set(id, resolve));
          const h = headers();
          h.set("Nats-Msg-Id", firstId);
          nc.publish(`${FLOOR.receiptSubject}.${executor}.${id}`, message, { headers: h });
          steps.answered(await answer);
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
  readyUntilStopped(() => Promise.all(stops.map((stop) => stop())));
}

async function producer(): Promise<void> {
  const agent = new Agent({ keepAlive: true, maxSockets: 256 });
  const body = LEAN_CALL_BODY;
  /** The call's assignment id in the creation's answer: the lean gateway's JSON, or the floor's id before a space. */
  const idIn = (text: string): string =>
    lean ? (JSON.parse(text) as { assignment: { assignment_id: string } }).assignment.assignment_id : text.slice(0, text.indexOf(" "));
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
          headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body), authorization: `Bearer ${API_KEY}` },
        },
        (res) => {
          let text = "";
          res.setEncoding("utf8");
          res.on("data", (chunk: string) => (text += chunk));
          res.on("end", () => (res.statusCode === 201 ? resolve(idIn(text)) : reject(new Error(`HTTP ${res.statusCode}: ${text}`))));
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
    for await (const e of watch) {
      if (e.operation !== "PUT" || e.key.startsWith("w.")) continue;
      if (lean ? leanCompleted(e.value) : e.value[0] === FLOOR.completedMark) completions.arrived(e.key);
    }
  })();
  // Without HTTP: the call as a NATS request on a connection of the producer's own.
  const calls = drops.has("http") ? await connectAs("bench-producer-floor") : undefined;
  const call = calls
    ? async (run: string) => {
        return idIn((await calls.request(`${FLOOR.createSubject}.${run}`, body, { timeout: CALL_TIMEOUT_MS })).string());
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
