/**
 * The process that makes toolgate's calls (`node --import tsx bench/lib/systems/toolgate-producer.ts`):
 * seeds the bench tool, then runs the closed-loop levels the driver sends (bench/lib/closed-loop.ts).
 * One call: `POST /v1/runs/{id}/tool-calls` → candidate → claim → grant → `accepted` (confirmed) → one
 * `progress` → `completed` → projection stored; its clock stops when the projection reaches this
 * process through a KV watch (push subscriptions: no polling, no extra request, no write). Store
 * layout 1 writes the projection to the projections bucket, layout 2 with the completion into the
 * assignment record: both buckets are watched, so any tree is timed to the same point.
 *
 * Environment: BENCH_GATEWAY_URL, BENCH_API_KEY, NATS_URL, BENCH_PROJECTIONS_BUCKET and
 * BENCH_ASSIGNMENTS_BUCKET (the measured tree's bucket names).
 */
import { Agent, request } from "node:http";
import { urlToHttpOptions } from "node:url";
import { connect } from "@nats-io/transport-node";
import { Kvm, KvWatchInclude } from "@nats-io/kv";
import { z } from "zod";
import { decode } from "../../../src/wire/codec.js";
import { ASSIGNMENT_BUCKET_WATCH_PREFIX } from "../../../src/streams/names.js";
import { closedLoop, serveLevels, type LevelCommand } from "../closed-loop.js";
import { BENCH_COMPLETION_CONNECTION } from "../nats-traffic.js";
import { BENCH_ARGUMENTS, BENCH_TOOL } from "../protocol-messages.js";
import { runConcurrently } from "../stats.js";
import { CompletionWatch } from "../completion-watch.js";

const env = (name: string): string => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};
const baseUrl = env("BENCH_GATEWAY_URL");
const apiKey = env("BENCH_API_KEY");
/** Tool calls per run: an agent turn makes a few; a run's record lists its calls, so it is not grown without bound. */
const CALLS_PER_RUN = 10;
const CALL_TIMEOUT_MS = 30_000;

// --- HTTP client: keep-alive sockets, so a call costs one request, not a TCP handshake.

const agent = new Agent({ keepAlive: true, maxSockets: 256 });
// Host and port parsed once: a URL string per request is parsed again each time (a tenth of this process's CPU per call).
const { hostname, port } = urlToHttpOptions(new URL(baseUrl));

function api<T = any>(method: "GET" | "POST", path: string, body?: unknown): Promise<T> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        hostname,
        port,
        path,
        method,
        agent,
        headers: {
          authorization: `Bearer ${apiKey}`,
          ...(payload ? { "content-type": "application/json", "content-length": Buffer.byteLength(payload) } : {}),
        },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => (text += chunk));
        res.on("end", () => {
          if ((res.statusCode ?? 500) >= 300) reject(new Error(`${method} ${path}: HTTP ${res.statusCode} ${text}`));
          else resolve(text ? JSON.parse(text) : undefined);
        });
      },
    );
    req.on("error", reject);
    req.end(payload);
  });
}

async function untilReady(timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if ((await api<{ ready: boolean }>("GET", "/readyz")).ready) return;
    } catch (err) {
      if (Date.now() > deadline) throw err;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Binding, toolset, agent version and session of the bench tool; returns the session id. */
async function seed(): Promise<string> {
  await api("POST", "/v1/bindings", { binding_id: BENCH_TOOL.bindingId, executor_scope: BENCH_TOOL.scope, tool_kind: "read" });
  const toolset = `${BENCH_TOOL.agent}-tools`;
  await api("POST", `/v1/toolsets/${toolset}/versions`, {
    version: "v1",
    tools: [
      {
        name: BENCH_TOOL.name,
        description: "Read tasks, a page at a time",
        binding_id: BENCH_TOOL.bindingId,
        input_schema: { type: "object", properties: { cursor: { type: "string" }, filter: { type: "object" }, limit: { type: "integer" } } },
        output_schema: { type: "object" },
        max_result_context_bytes: 16_384,
      },
    ],
  });
  const version = await api("POST", `/v1/agents/${BENCH_TOOL.agent}/versions`, { toolset, toolset_version: "v1", max_context_tokens: 100_000 });
  return (await api("POST", "/v1/sessions", { agent_version: version.agent_version, subject: "user-42" })).session_id;
}

// --- Completion: a call is done when its projection is stored (what the run's history then shows).

await untilReady();
const sessionId = await seed();
const nc = await connect({ servers: env("NATS_URL"), name: BENCH_COMPLETION_CONNECTION });
const kvm = new Kvm(nc);
const projections = await (await kvm.open(env("BENCH_PROJECTIONS_BUCKET"))).watch({ include: KvWatchInclude.UpdatesOnly });
const assignments = await (await kvm.open(env("BENCH_ASSIGNMENTS_BUCKET"))).watch({ include: KvWatchInclude.UpdatesOnly });
/** What the watch reads of an assignment record: a completed one that carries its projection is done. */
const Completion = z.looseObject({ state: z.string(), projection: z.unknown().optional() });
const watch = new CompletionWatch(CALL_TIMEOUT_MS);
void (async () => {
  for await (const e of projections) if (e.operation === "PUT") watch.arrived(e.key);
})();
void (async () => {
  for await (const e of assignments) {
    // The lease sweeper's watches share the bucket from store layout 6 on: no assignments.
    if (e.operation !== "PUT" || e.key.startsWith(ASSIGNMENT_BUCKET_WATCH_PREFIX)) continue;
    const a = decode(Completion, e.value);
    if (a.state === "completed" && a.projection !== undefined) watch.arrived(e.key);
  }
})();

// --- Runs are made before each level: their creation is not part of a tool call, nor are their writes.

const runs: string[] = [];
let bestRate = 100;
async function stockRuns(command: LevelCommand): Promise<void> {
  // Twice the best rate seen so far; a caller that still runs short makes its run inside the loop.
  const wanted = command.concurrency + Math.ceil((2 * bestRate * command.seconds) / CALLS_PER_RUN);
  await runConcurrently(Math.max(0, wanted - runs.length), 10, async () => {
    runs.push((await api("POST", `/v1/sessions/${sessionId}/runs`)).run_id);
  });
}

/** Each caller keeps a run for CALLS_PER_RUN calls, then takes the next. */
async function toolCall(state: { run: string; used: number }): Promise<void> {
  if (state.used === CALLS_PER_RUN) {
    state.run = runs.pop() ?? (await api("POST", `/v1/sessions/${sessionId}/runs`)).run_id;
    state.used = 0;
  }
  state.used++;
  const created = await api("POST", `/v1/runs/${state.run}/tool-calls`, { tool_name: BENCH_TOOL.name, arguments: BENCH_ARGUMENTS });
  await watch.done(created.assignment.assignment_id);
}

serveLevels(
  async (command) => {
    const callers = Array.from({ length: command.concurrency }, () => ({ run: "", used: CALLS_PER_RUN }));
    const outcome = await closedLoop(command, (caller) => toolCall(callers[caller]!));
    bestRate = Math.max(bestRate, (outcome.calls / outcome.elapsedMs) * 1000);
    return outcome;
  },
  async () => {
    projections.stop();
    assignments.stop();
    await nc.close();
    agent.destroy();
  },
  stockRuns,
);
