import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { ConfigStore } from "../../src/config/config-store.js";
import type { Candidate } from "../../src/wire/messages.js";
import { admin } from "../helpers/gateway.js";
import { requestJson, seedSession } from "../helpers/execution-gateway.js";
import { startTestNats, type TestNats } from "../helpers/nats.js";
import { ProtocolExecutor } from "../helpers/protocol-executor.js";
import { until } from "../helpers/until.js";
import { serve, type ServeProcess } from "../helpers/serve.js";

const SCOPE = "spread";
const TOOL_CALLS = 90;
const GATEWAYS = 3;

/** A JSON request that must succeed. */
async function http(base: string, method: string, path: string, body?: unknown): Promise<any> {
  const res = await requestJson(base, method, path, body);
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

/** Sum of every sample of `name` whose labels contain all of `labels` (e.g. `status="recorded"`). */
function total(text: string, name: string, ...labels: string[]): number {
  return text
    .split("\n")
    .filter((l) => l.startsWith(name + "{") && labels.every((want) => l.includes(want)))
    .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(" ") + 1)), 0);
}

describe("three 'toolgate serve' processes share the receipt consumer", () => {
  let nats: TestNats;
  let nc: NatsConnection;
  let gateways: ServeProcess[] = [];
  const dirs: string[] = [];

  beforeAll(async () => {
    nats = await startTestNats();
    gateways = await Promise.all(
      Array.from({ length: GATEWAYS }, () => {
        const dir = mkdtempSync(join(tmpdir(), "toolgate-scale-"));
        dirs.push(dir);
        return serve({ NATS_URL: nats.url, TOOLGATE_DATA_DIR: dir, TOOLGATE_IDENTITIES: JSON.stringify([admin]) });
      }),
    );
    nc = await connect({ servers: nats.url });
  });
  afterAll(async () => {
    await nc?.close();
    for (const gw of gateways) gw.child.kill("SIGTERM");
    await Promise.all(gateways.map((gw) => gw.exited));
    await nats?.stop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it(`spreads the receipts of ${TOOL_CALLS} tool calls over every replica, each processed once`, async () => {
    const sessionId = await seedSession(await ConfigStore.open(nc), {
      scope: SCOPE,
      agent: "spread-bot",
      tools: [{ name: "spread.do", binding_id: "b-spread" }],
    });
    const executors = [0, 1].map((i) => new ProtocolExecutor(nc, SCOPE, `spread-${i}`, ["b-spread"]));
    for (const e of executors) expect((await e.heartbeat()).status).toBe("ok");

    let completed = 0;
    let stop = false;
    const work = async (exec: ProtocolExecutor, c: Candidate) => {
      const reply = await exec.claim(c.assignment_id, c.generation);
      if (reply.status !== "granted") return;
      const g = reply.grant;
      expect((await exec.send(exec.accepted(g))).status).toBe("recorded");
      expect((await exec.send(exec.receipt(g, { kind: "completed", result: { args: g.arguments } }))).status).toBe("recorded");
      completed++;
    };
    const loops = executors.map(async (exec) => {
      while (!stop) {
        // A failed pull must not spin: it would starve the event loop.
        const batch = await exec.pull(8, 1_000).catch(() => new Promise<Candidate[]>((r) => setTimeout(() => r([]), 100)));
        await Promise.all(batch.map((c) => work(exec, c)));
      }
    });

    const bases = gateways.map((g) => g.url);
    const runs = await Promise.all(bases.map((b) => http(b, "POST", `/v1/sessions/${sessionId}/runs`)));
    for (let i = 0; i < TOOL_CALLS; i++)
      await http(bases[i % GATEWAYS]!, "POST", `/v1/runs/${runs[i % GATEWAYS].run_id}/tool-calls`, {
        tool_name: "spread.do",
        arguments: { i },
        tool_call_id: `call-${i}`,
      });
    await until("every tool call completed", async () => (completed === TOOL_CALLS ? true : undefined), 60_000, 100);
    stop = true;
    await Promise.all(loops);
    for (const e of executors) e.close();

    const scrapes = await Promise.all(bases.map(async (b) => (await fetch(`${b}/metrics`)).text()));
    const perGateway = scrapes.map((s) => total(s, "toolgate_receipts_total", 'status="recorded"'));
    // Every replica did part of the consumer's work, and together they did all of it exactly once.
    for (const [i, n] of perGateway.entries()) expect(n, `gateway ${i} recorded receipts (all: ${perGateway.join(", ")})`).toBeGreaterThan(0);
    expect(perGateway.reduce((a, b) => a + b)).toBe(2 * TOOL_CALLS);
    expect(scrapes.reduce((sum, s) => sum + total(s, "toolgate_receipts_total", 'kind="completed"'), 0)).toBe(TOOL_CALLS);
    expect(scrapes.reduce((sum, s) => sum + total(s, "toolgate_claims_total", 'outcome="granted"'), 0)).toBe(TOOL_CALLS);
    expect(scrapes.reduce((sum, s) => sum + total(s, "toolgate_assignments_total", 'state="completed"'), 0)).toBe(TOOL_CALLS);
    expect(scrapes.reduce((sum, s) => sum + total(s, "toolgate_projections_total"), 0)).toBe(TOOL_CALLS);
    for (const s of scrapes) expect(s).toMatch(/^toolgate_claim_latency_seconds_count \d+$/m);
    expect(scrapes.reduce((sum, s) => sum + Number(/^toolgate_claim_latency_seconds_count (\d+)$/m.exec(s)![1]), 0)).toBe(TOOL_CALLS);
    // The shared consumer's state is the same cluster-wide view from every replica: nothing left.
    for (const s of scrapes) expect(total(s, "toolgate_consumer_pending_messages", 'stream="TG_RECEIPTS"', 'consumer="gateway"')).toBe(0);

    const histories = await Promise.all(runs.map((r, i) => http(bases[i]!, "GET", `/v1/runs/${r.run_id}/history`)));
    expect(histories.flatMap((h) => h.tool_calls).filter((c) => c.state === "completed")).toHaveLength(TOOL_CALLS);
  });
});
