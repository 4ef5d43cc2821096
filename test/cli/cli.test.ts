import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect } from "@nats-io/transport-node";
import { AckPolicy, jetstreamManager } from "@nats-io/jetstream";
import { commands } from "../../src/cli/main.js";
import { startTestNats, type TestNats } from "../helpers/nats.js";
import { seedSession, startExecutionGateway } from "../helpers/execution-gateway.js";
import { ProtocolExecutor } from "../helpers/protocol-executor.js";
import { runCli, runCliInPipe } from "../helpers/serve.js";

describe("toolgate CLI", () => {
  let nats: TestNats;

  beforeAll(async () => {
    nats = await startTestNats();
  });
  afterAll(async () => {
    await nats?.stop();
  });

  it("lists every registered command in 'toolgate --help'", async () => {
    const res = await runCli(["--help"]);
    expect(res.code).toBe(0);
    for (const c of commands) expect(res.stdout).toMatch(new RegExp(`^  ${c.name} +${c.summary.replace(/[()[\]]/g, "\\$&")}$`, "m"));
  });

  it("'toolgate --version' prints the package's version", async () => {
    const { version } = JSON.parse(readFileSync("package.json", "utf8")) as { version: string };
    expect(await runCli(["--version"])).toEqual({ code: 0, stdout: `toolgate ${version}\n`, stderr: "" });
  });

  it("stops quietly with exit 0 when the reader of its output goes away ('| head -c 100')", async () => {
    const dir = mkdtempSync(join(tmpdir(), "toolgate-pipe-"));
    try {
      const big = join(dir, "big.json");
      writeFileSync(big, JSON.stringify({ rows: Array.from({ length: 20_000 }, (_, i) => ({ id: i, text: "x".repeat(100) })) }));
      const res = await runCliInPipe(["measure", "--kind", "submission", big], 100);
      expect(res).toEqual({ code: 0, head: expect.stringMatching(/^\{/), stderr: "" });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it.each(commands.map((c) => [c.name, c] as const))("'toolgate %s --help' prints its usage and exits 0", async (name, command) => {
    expect(command.usage.startsWith(`Usage: toolgate ${name}`)).toBe(true);
    expect(command.summary).toMatch(/^[A-Z].{10,}/);
    const res = await runCli([name, "--help"]);
    expect(res).toEqual({ code: 0, stdout: command.usage + "\n", stderr: "" });
  });

  it("'toolgate status' shows streams and consumers with pending, ack pending and redelivered counts", async () => {
    expect((await runCli(["streams", "apply"], { NATS_URL: nats.url })).code).toBe(0);
    const nc = await connect({ servers: nats.url });
    try {
      // Two unacknowledged values in a consumer of a declared stream, so the counts are not all zero.
      const jsm = await jetstreamManager(nc);
      await jsm.consumers.add("KV_tg_config", { durable_name: "status-probe", ack_policy: AckPolicy.Explicit });
      const js = jsm.jetstream();
      await js.publish("$KV.tg_config.probe.a", "1");
      await js.publish("$KV.tg_config.probe.b", "2");
      const consumer = await js.consumers.get("KV_tg_config", "status-probe");
      await consumer.next(); // delivered, never acknowledged

      const table = await runCli(["status"], { NATS_URL: nats.url });
      expect(table.code, table.stderr).toBe(0);
      expect(table.stdout).toMatch(/^NATS .*: server \S+ 2\.\d+\.\d+/);
      expect(table.stdout).toMatch(/^ {2}KV_tg_config +2 +\d+ +1 /m);
      expect(table.stdout).toMatch(/^ {2}stream +consumer +pending +ack_pending +redelivered +waiting +max_ack_pending$/m);
      expect(table.stdout).toMatch(/^ {2}KV_tg_config +status-probe +1 +1 +0 +0 +\d+$/m);

      const json = JSON.parse((await runCli(["status", "--json"], { NATS_URL: nats.url })).stdout) as { jetstream: { consumers: unknown[] } };
      expect(json.jetstream.consumers).toContainEqual(
        expect.objectContaining({ stream: "KV_tg_config", name: "status-probe", pending: 1, ackPending: 1, redelivered: 0 }),
      );
    } finally {
      await nc.close();
    }
  });

  it("'toolgate status' lists the executors online and the pending assignments per scope", async () => {
    const gw = await startExecutionGateway(nats.url);
    const nc = await connect({ servers: nats.url });
    const executor = new ProtocolExecutor(nc, "ops-scope", "ops-exec-1", ["b-ops"]);
    try {
      const sessionId = await seedSession(gw.gateway.store, { scope: "ops-scope", agent: "ops-bot", tools: [{ name: "ops.do", binding_id: "b-ops" }] });
      expect((await executor.heartbeat()).status).toBe("ok");
      const run = await gw.http("POST", `/v1/sessions/${sessionId}/runs`);
      for (const i of [1, 2])
        expect((await gw.http("POST", `/v1/runs/${run.body.run_id}/tool-calls`, { tool_name: "ops.do", arguments: {}, tool_call_id: `c${i}` })).status).toBe(
          201,
        );

      const res = await runCli(["status"], { NATS_URL: nats.url });
      expect(res.code, res.stderr).toBe(0);
      expect(res.stdout).toContain("Executors online: 1\n");
      expect(res.stdout).toMatch(/^ {2}ops-scope +ops-exec-1 +0 +\d+ +b-ops$/m);
      expect(res.stdout).toContain("Pending assignments (not yet claimed): 2\n");
      expect(res.stdout).toMatch(/^ {2}ops-scope +2$/m);
      expect(res.stdout).toMatch(/^ {2}TG_CANDIDATES +cand-ops-scope +2 +0 +0 /m);
    } finally {
      executor.close();
      await nc.close();
      await gw.close();
    }
  });

  it("'toolgate status' exits 1 naming a declared stream the server lacks, and 2 without a server", async () => {
    const fresh = await startTestNats();
    try {
      const res = await runCli(["status"], { NATS_URL: fresh.url });
      expect(res.code).toBe(1);
      expect(res.stdout).toMatch(/KV_tg_config .*stream not found/);
    } finally {
      await fresh.stop();
    }
    const emptyDir = mkdtempSync(join(tmpdir(), "toolgate-nodir-"));
    const none = await runCli(["status"], { TOOLGATE_DATA_DIR: emptyDir });
    rmSync(emptyDir, { recursive: true });
    expect(none.code).toBe(2);
    expect(none.stderr).toContain(
      `no NATS server: pass --server URL, set NATS_URL, or run 'toolgate serve' from this directory first (it writes ${join(emptyDir, "nats.url")})`,
    );
  });
});
