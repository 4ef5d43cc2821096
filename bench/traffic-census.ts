/**
 * `npm run bench:census`: every NATS message of N sequential tool calls (create, claim, `accepted`,
 * one progress, `completed`), counted by what it is for: a KV read or write of which bucket, a stream
 * publish, its acknowledgement, a request and its reply. Where `bench:e2e` says how many messages a
 * call costs, this says which ones, so a redesign knows what to cut. One gateway in this process, a
 * protocol-level executor, a nats-server of its own (random port); nothing is timed.
 * With CENSUS_TRACE=1 it also prints the last call's messages in the order the spy saw them, with
 * the time since the call began: the sequential round trips a call waits on, step by step.
 * With CENSUS_VIA=mcp each call is an MCP `tools/call` (the official SDK's client on the session's
 * MCP endpoint) that waits for the call's answer, instead of `POST /v1/runs/{id}/tool-calls`.
 * With CENSUS_TOOL_CALL_ID=1 each call carries a tool_call_id (the idempotency key an agent
 * platform passes; over MCP, `_meta["io.toolgate/tool_call_id"]`).
 * Environment: CENSUS_CALLS (default 200), CENSUS_TRACE, CENSUS_VIA (http or mcp), CENSUS_TOOL_CALL_ID, TOOLGATE_NATS_SERVER (the nats-server binary).
 */
import { connect, type Msg } from "@nats-io/transport-node";
import { startTestNats } from "../test/helpers/nats.js";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Candidate } from "../src/wire/messages.js";
import { receiptId } from "../src/wire/receipt-ids.js";
import { ADMIN_KEY, seedSession, startExecutionGateway } from "../test/helpers/execution-gateway.js";
import { ProtocolExecutor } from "../test/helpers/protocol-executor.js";
import { executorJetStreamMappings } from "../src/security/jsapi-bridge.js";
import { TOOL_CALL_ID_META } from "../src/mcp-server/session-tools.js";

const CALLS = Number(process.env.CENSUS_CALLS ?? 200);
const SCOPE = "census";
const TRACE = process.env.CENSUS_TRACE === "1";
const VIA = process.env.CENSUS_VIA ?? "http";
const WITH_TOOL_CALL_ID = process.env.CENSUS_TOOL_CALL_ID === "1";
if (VIA !== "http" && VIA !== "mcp") throw new Error(`CENSUS_VIA=${VIA}: http or mcp`);

/** The class of a message by its subject; replies are classed by the request they answer. */
function classify(subject: string): string {
  const t = subject.split(".");
  if (subject.startsWith("$JS.API.DIRECT.GET.")) return `kv read ${t[4]!.replace(/^KV_/, "")}`;
  if (subject.startsWith("$KV.")) return `kv write ${t[1]}`;
  if (subject.startsWith("$JS.API.")) return `js api ${t.slice(2, 4).join(".")}`;
  if (subject.startsWith("$JS.ACK.")) return "consumer ack";
  if (subject.startsWith("$JS.")) return t.slice(0, 3).join(".");
  if (subject.startsWith("tg.")) return t.slice(0, 2).join(".");
  return t[0]!;
}

async function main(): Promise<void> {
  // Configured as the embedded server is: the executor's pulls reach JetStream by the server's own mapping, as in a secured deployment.
  const nats = await startTestNats({ config: executorJetStreamMappings() });
  const gw = await startExecutionGateway(nats.url);
  const sessionId = await seedSession(gw.gateway.store, { scope: SCOPE, agent: "census-bot", tools: [{ name: "census.read", binding_id: "b-census" }] });
  const nc = await connect({ servers: nats.url, name: "census-executor" });
  const exec = new ProtocolExecutor(nc, SCOPE, "exec-census", ["b-census"]);
  await exec.heartbeat();
  const run = await gw.http("POST", `/v1/sessions/${sessionId}/runs`);
  const runId: string = run.body.run_id;

  const spy = await connect({ servers: nats.url, name: "census-spy" });
  const counts = new Map<string, number>();
  const replyClass = new Map<string, string>();
  let counting = false;
  /** The current call's messages as seen: [ms since the call began, class]. */
  let trace: Array<[number, string]> = [];
  let callStart = 0;
  spy.subscribe(">", {
    callback: (_err, m: Msg) => {
      if (!counting) return;
      const asked = replyClass.get(m.subject);
      const what = asked ? `${asked} (reply)` : classify(m.subject);
      if (asked) replyClass.delete(m.subject);
      else if (m.reply) replyClass.set(m.reply, what);
      counts.set(what, (counts.get(what) ?? 0) + 1);
      if (TRACE) trace.push([performance.now() - callStart, what]);
    },
  });
  await spy.flush();

  const mcp = VIA === "mcp" ? await mcpClient(`${gw.baseUrl}/v1/sessions/${sessionId}/mcp`) : undefined;
  /** The call made, and its candidate as the executor pulled it; resolves the call's answer when `answered` is awaited. */
  /** Calls made so far: each one's tool_call_id is new (warm-up calls included). */
  let made = 0;
  const makeCall = async (i: number): Promise<{ candidate: Candidate; answered: Promise<unknown> }> => {
    if (!mcp) {
      const created = await gw.http("POST", `/v1/runs/${runId}/tool-calls`, {
        tool_name: "census.read",
        arguments: { i },
        ...(WITH_TOOL_CALL_ID ? { tool_call_id: `tc-${made++}` } : {}),
      });
      return { candidate: await exec.pullFor(created.body.assignment.assignment_id), answered: Promise.resolve() };
    }
    // The MCP call waits for its answer while the executor works: the only candidate out is its own.
    const answered = mcp.callTool({ name: "census.read", arguments: { i }, ...(WITH_TOOL_CALL_ID ? { _meta: { [TOOL_CALL_ID_META]: `tc-${made++}` } } : {}) });
    for (;;) {
      const [candidate] = await exec.pull(1, 2_000);
      if (candidate) return { candidate, answered };
    }
  };
  const oneCall = async (i: number) => {
    trace = [];
    callStart = performance.now();
    const { candidate, answered } = await makeCall(i);
    const id = candidate.assignment_id;
    const { reply, ...terms } = await exec.claimWithOrder(id, candidate.generation);
    if (reply.status !== "granted") throw new Error(`claim refused: ${reply.code}`);
    // Receipt ids bound to the claim, and a read's `accepted`, report and final receipt sent as the
    // ToolRunner sends them (a read done within its `acceptedLingerMs`): one chain message.
    const g = reply.grant;
    await exec.postAsRunner(
      [
        exec.accepted(g, receiptId(g, { kind: "accepted" })),
        exec.claimReceipt(g, { kind: "progress", seq: 1, progress: { done: 1 } }),
        exec.claimReceipt(g, { kind: "completed", result: { items: [i], note: "x".repeat(400) } }),
      ],
      terms,
      { read: g.tool_kind === "read" },
    );
    await answered;
  };
  for (let i = 0; i < 5; i++) await oneCall(i); // warm: consumers made, run known
  counting = true;
  for (let i = 0; i < CALLS; i++) {
    await oneCall(i);
    if (i % 50 === 49) process.stderr.write(`census: ${i + 1}/${CALLS} calls\n`);
  }
  await spy.flush();
  counting = false;

  const rows = [...counts.entries()].sort((a, b) => b[1] - a[1]);
  const total = rows.reduce((s, [, n]) => s + n, 0);
  process.stdout.write(
    `Messages per tool call (${VIA === "mcp" ? "MCP tools/call" : "HTTP"}${WITH_TOOL_CALL_ID ? ", each with a tool_call_id" : ""}), ${CALLS} sequential calls (one progress each), by class (the executor's pulls included):\n\n`,
  );
  process.stdout.write("| class | per call |\n| --- | --- |\n");
  for (const [what, n] of rows) process.stdout.write(`| ${what} | ${(n / CALLS).toFixed(2)} |\n`);
  process.stdout.write(`| **all** | **${(total / CALLS).toFixed(2)}** |\n`);
  if (TRACE) {
    process.stdout.write(`\nThe last call's messages as the spy saw them (ms since the call began):\n\n| ms | class |\n| --- | --- |\n`);
    for (const [ms, what] of trace) process.stdout.write(`| ${ms.toFixed(2)} | ${what} |\n`);
  }

  await spy.close();
  await mcp?.close();
  exec.close();
  await nc.close();
  await gw.close();
  await nats.stop();
}

/** An MCP client of the official SDK on a session's MCP endpoint, as the admin. */
async function mcpClient(endpoint: string): Promise<Client> {
  const client = new Client({ name: "toolgate-census", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(endpoint), { requestInit: { headers: { authorization: `Bearer ${ADMIN_KEY}` } } }));
  return client;
}

main().catch((err: unknown) => {
  process.stderr.write(`census: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
