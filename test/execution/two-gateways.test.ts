import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { ConfigStore } from "../../src/config/config-store.js";
import type { Candidate } from "../../src/wire/messages.js";
import { startTestNats, type TestNats } from "../helpers/nats.js";
import { ADMIN_KEY, seedSession } from "../helpers/execution-gateway.js";
import { ProtocolExecutor } from "../helpers/protocol-executor.js";
import { until } from "../helpers/until.js";
import { startGatewayProcess, type GatewayProcess } from "../helpers/processes.js";

const SCOPE = "bulk";
const TOOL_CALLS = 1_000;
const RUNS = 10;

async function http(base: string, method: string, path: string, body?: unknown): Promise<any> {
  const send = () =>
    fetch(base + path, {
      method,
      headers: { authorization: `Bearer ${ADMIN_KEY}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  let res = await send();
  // 1,000 calls from 20 senders outrun the admin's rate limit on a quiet machine: wait as told, as a client does.
  for (let attempt = 0; res.status === 429 && attempt < 30; attempt++) {
    await new Promise((resolve) => setTimeout(resolve, Number(res.headers.get("retry-after") ?? 1) * 1_000));
    res = await send();
  }
  const json = await res.json();
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

describe("two gateway processes on the same streams", () => {
  let nats: TestNats;
  const children: GatewayProcess[] = [];
  let conns: NatsConnection[] = [];

  beforeAll(async () => {
    nats = await startTestNats();
    children.push(await startGatewayProcess(nats.url));
    children.push(await startGatewayProcess(nats.url));
    conns = await Promise.all([0, 1].map(() => connect({ servers: nats.url })));
  });
  afterAll(async () => {
    for (const c of conns) await c.close();
    await Promise.all(children.map((c) => c.stop()));
    await nats?.stop();
  });

  it("completes 1,000 tool calls, each exactly once in history", async () => {
    const store = await ConfigStore.open(conns[0]!);
    const sessionId = await seedSession(store, { scope: SCOPE, agent: "bulk-bot", tools: [{ name: "bulk.do", binding_id: "b-bulk", tool_kind: "write" }] });
    const executors = Array.from({ length: 4 }, (_, i) => new ProtocolExecutor(conns[i % 2]!, SCOPE, `bulk-${i}`, ["b-bulk"]));
    for (const e of executors) expect((await e.heartbeat()).status).toBe("ok");

    const answers = { recorded: 0, resent: 0, duplicate: 0, other: [] as string[] };
    let stop = false;
    const work = async (exec: ProtocolExecutor, c: Candidate, resend: boolean): Promise<void> => {
      const reply = await exec.claim(c.assignment_id, c.generation);
      if (reply.status !== "granted") return;
      const g = reply.grant;
      await exec.send(exec.accepted(g));
      const done = exec.receipt(g, { kind: "completed", result: { args: g.arguments } });
      const a = await exec.send(done);
      if (a.status === "recorded") answers.recorded++;
      else answers.other.push(`${a.status}:${a.code}`);
      // A resend past the stream's de-duplication (another Nats-Msg-Id): must be a duplicate, never applied twice.
      if (resend) {
        answers.resent++;
        const again = await exec.send({ ...done, replayed: true }, `${done.receipt_id}-late`);
        if (again.status === "duplicate") answers.duplicate++;
      }
    };
    // Presence is kept alive apart from the work, as a real executor does.
    const heartbeats = setInterval(() => executors.forEach((e) => void e.heartbeat().catch(() => undefined)), 2_000);
    const loops = executors.map(async (exec) => {
      while (!stop) {
        // A pull that failed (missed heartbeats on a busy machine) is retried after a pause: one that
        // fails at once would otherwise spin on microtasks and starve every timer of the test.
        const batch = await exec.pull(32, 1_000).catch(async () => {
          await new Promise((resolve) => setTimeout(resolve, 100));
          return [];
        });
        await Promise.all(batch.map((c, i) => work(exec, c, i % 10 === 0).catch((err: Error) => answers.other.push(`error:${err.message}`))));
      }
    });

    const bases = children.map((c) => c.url);
    const runIds: string[] = [];
    for (let r = 0; r < RUNS; r++) runIds.push((await http(bases[r % 2]!, "POST", `/v1/sessions/${sessionId}/runs`)).run_id);
    let next = 0;
    await Promise.all(
      Array.from({ length: 20 }, async () => {
        for (let i = next++; i < TOOL_CALLS; i = next++) {
          await http(bases[i % 2]!, "POST", `/v1/runs/${runIds[i % RUNS]}/tool-calls`, { tool_name: "bulk.do", arguments: { i }, tool_call_id: `call-${i}` });
        }
      }),
    );

    await until("every tool call answered", async () => (answers.recorded + answers.other.length >= TOOL_CALLS ? true : undefined), 90_000, 100);
    const histories = await Promise.all(runIds.map((id, r) => http(bases[r % 2]!, "GET", `/v1/runs/${id}/history`)));
    stop = true;
    clearInterval(heartbeats);
    await Promise.all(loops);
    for (const e of executors) e.close();

    const seen = new Set<number>();
    for (const h of histories) {
      expect(h.tool_calls).toHaveLength(TOOL_CALLS / RUNS);
      for (const call of h.tool_calls) {
        expect(call.state).toBe("completed");
        expect(call.context_preview.result).toEqual({ args: call.arguments });
        seen.add(call.arguments.i);
      }
    }
    expect(seen.size).toBe(TOOL_CALLS);
    expect(answers.recorded).toBe(TOOL_CALLS);
    expect(answers.other).toEqual([]);
    expect(answers.resent).toBeGreaterThan(0);
    expect(answers.duplicate).toBe(answers.resent);
  }, 150_000);
});
