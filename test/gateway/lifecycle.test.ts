import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GatewayEnvSchema, renderGatewayEnvTable } from "../../src/gateway/config.js";
import { startTestNats, type TestNats } from "../helpers/nats.js";
import { ADMIN_KEY, bindingExample } from "../helpers/gateway.js";
import { runCli, serve } from "../helpers/serve.js";
import { until } from "../helpers/until.js";
import { executorJetStreamMappings } from "../../src/security/jsapi-bridge.js";

const identities = JSON.stringify([{ name: "admin", key: ADMIN_KEY, agents: "*", permissions: ["configuration:read", "configuration:write"] }]);
/** A TCP port held by this process, as another program would hold it. */
async function holdPort(): Promise<{ port: number; server: Server }> {
  const server = createServer();
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  return { port: (server.address() as { port: number }).port, server };
}

/** The embedded nats-server of a serve log: its pid and URL. */
function embeddedNatsOf(stderr: string): { pid: number; url: string } {
  const line = stderr.split("\n").find((l) => l.includes("started an embedded nats-server"));
  if (!line) throw new Error(`no embedded nats-server in:\n${stderr}`);
  return JSON.parse(line) as { pid: number; url: string };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe("gateway process lifecycle", () => {
  let nats: TestNats;
  let dataDir: string;

  beforeAll(async () => {
    nats = await startTestNats();
    dataDir = mkdtempSync(join(tmpdir(), "toolgate-life-"));
  });
  afterAll(async () => {
    await nats?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("refuses to start on a bad value, naming the variable, the value and what is allowed", async () => {
    const bad = await runCli(["serve"], {
      NATS_URL: nats.url,
      TOOLGATE_DATA_DIR: dataDir,
      TOOLGATE_SHUTDOWN_TIMEOUT_MS: "soon",
      TOOLGATE_STREAM_REPLICAS: "7",
    });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('TOOLGATE_SHUTDOWN_TIMEOUT_MS="soon": Invalid input: expected number, received NaN (allowed: integer 1000..600000)');
    expect(bad.stderr).toContain('TOOLGATE_STREAM_REPLICAS="7"');
    expect(bad.stderr).toContain("(allowed: integer 1..5)");
    const seed = await runCli(["serve"], { NATS_URL: nats.url, NATS_NKEY_SEED_FILE: join(dataDir, "missing.nk") });
    expect(seed.code).toBe(1);
    expect(seed.stderr).toContain(`NATS_NKEY_SEED_FILE: cannot read ${join(dataDir, "missing.nk")}`);
    const both = await runCli(["serve"], { TOOLGATE_IDENTITIES: "[]", TOOLGATE_IDENTITIES_FILE: "/x" });
    expect(both.stderr).toContain('TOOLGATE_IDENTITIES_FILE="/x": set only one of TOOLGATE_IDENTITIES and TOOLGATE_IDENTITIES_FILE');
    const url = await runCli(["serve"], { NATS_URL: "http://example.com/nats" });
    expect(url.stderr).toContain('NATS_URL="http://example.com/nats": not a comma-separated list of NATS servers');
  });

  it("with its HTTP port taken: says so, stops the embedded nats-server it started and exits 1", async () => {
    const held = await holdPort();
    const dir = mkdtempSync(join(dataDir, "taken-"));
    try {
      const res = await runCli(["serve", "--port", String(held.port)], { TOOLGATE_DATA_DIR: dir });
      expect(res.code, res.stderr).toBe(1);
      expect(res.stderr).toContain(`cannot listen: 127.0.0.1:${held.port} is taken; stop what holds it or choose another port (--port, TOOLGATE_HTTP_PORT)`);
      expect(alive(embeddedNatsOf(res.stderr).pid)).toBe(false);
      expect(existsSync(join(dir, "nats.url"))).toBe(false);
    } finally {
      held.server.close();
    }
  });

  it("a start that fails after the embedded nats-server started (3 replicas on one server) exits 1 and leaves no child", async () => {
    const res = await runCli(["serve", "--port", "0"], { TOOLGATE_DATA_DIR: mkdtempSync(join(dataDir, "replicas-")), TOOLGATE_STREAM_REPLICAS: "3" });
    expect(res.code, res.stderr).toBe(1);
    expect(res.stderr).toMatch(/toolgate serve: .*replica/i);
    expect(alive(embeddedNatsOf(res.stderr).pid)).toBe(false);
  });

  it("the embedded nats-server: its port taken, it takes a free one; its URL in nats.url, where 'toolgate status' finds it; gone on stop", async () => {
    const held = await holdPort();
    const dir = mkdtempSync(join(dataDir, "local-"));
    try {
      const gw = await serve({ TOOLGATE_DATA_DIR: dir, TOOLGATE_EMBEDDED_NATS_PORT: String(held.port) });
      expect(gw.logs.join("\n")).toContain("the embedded nats-server's port is taken: using a free one instead");
      const { url } = embeddedNatsOf(gw.logs.join("\n"));
      expect(url).not.toBe(`nats://127.0.0.1:${held.port}`);
      expect(readFileSync(join(dir, "nats.url"), "utf8").trim()).toBe(url);
      // It maps the executors' pulls to JetStream itself (test/security/executor-jetstream-api.test.ts).
      expect(readFileSync(join(dir, "nats", "nats-server.conf"), "utf8")).toBe(executorJetStreamMappings());
      const status = await runCli(["status", "--json"], { TOOLGATE_DATA_DIR: dir });
      expect(status.code, status.stderr).toBe(0);
      expect(JSON.parse(status.stdout).server.url).toBe(url.replace("nats://", ""));
      gw.child.kill("SIGTERM");
      expect(await gw.exited).toBe(0);
      expect(existsSync(join(dir, "nats.url"))).toBe(false);
    } finally {
      held.server.close();
    }
  });

  it("documents every variable in docs/operations.md, exactly as the schema declares it", () => {
    const doc = readFileSync("docs/operations.md", "utf8");
    expect(doc).toContain(renderGatewayEnvTable());
    for (const name of Object.keys(GatewayEnvSchema.shape)) expect(doc).toContain(`| \`${name}\` |`);
  });

  it("on SIGTERM finishes the in-flight request, refuses new connections, exits 0 and logs 'gateway stopped' last", async () => {
    const gw = await serve({ NATS_URL: nats.url, TOOLGATE_DATA_DIR: dataDir, TOOLGATE_IDENTITIES: identities });
    const body = JSON.stringify(bindingExample);
    const { hostname, port } = new URL(gw.url);
    // A request whose body is still arriving when the signal comes: in flight, not yet handled. Its
    // `Expect: 100-continue` makes the server say when it has read the headers: then it is in flight there.
    const inFlight = request({
      hostname,
      port,
      method: "POST",
      path: "/v1/bindings",
      headers: { authorization: `Bearer ${ADMIN_KEY}`, "content-type": "application/json", "content-length": Buffer.byteLength(body), expect: "100-continue" },
    });
    const seen = new Promise<void>((resolve) => inFlight.once("continue", resolve));
    const response = new Promise<{ status: number; body: string; connection?: string }>((resolve, reject) => {
      inFlight.on("response", (res) => {
        let text = "";
        res.setEncoding("utf8").on("data", (c: string) => (text += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text, connection: res.headers.connection }));
      });
      inFlight.on("error", reject);
    });
    inFlight.flushHeaders();
    await seen;
    inFlight.write(body.slice(0, 10));

    gw.child.kill("SIGTERM");
    await until("the stop log line", () => (gw.logs.some((l) => l.includes("stopping: finishing in-flight work")) ? true : undefined), 10_000);
    // The server stops listening as it starts closing: a new connection is refused from then on.
    await until(
      "/healthz to refuse a new connection",
      () =>
        fetch(`${gw.url}/healthz`).then(
          () => undefined,
          () => true,
        ),
      10_000,
    );

    inFlight.end(body.slice(10));
    const res = await response;
    expect(res.status, res.body).toBe(201);
    expect(JSON.parse(res.body)).toMatchObject(bindingExample);
    expect(res.connection, "a keep-alive socket must not hold the shutdown").toBe("close");
    expect(await gw.exited).toBe(0);
    const last = JSON.parse(gw.logs.at(-1)!) as { msg: string };
    expect(last.msg).toBe("gateway stopped");
  });
});
