import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GatewayEnvSchema, renderGatewayEnvTable } from "../../src/gateway/config.js";
import { startTestNats, type TestNats } from "../helpers/nats.js";
import { ADMIN_KEY, bindingExample } from "../helpers/gateway.js";
import { runCli, serve } from "../helpers/serve.js";

const identities = JSON.stringify([{ name: "admin", key: ADMIN_KEY, agents: "*", permissions: ["configuration:read", "configuration:write"] }]);
const until = async (check: () => boolean, what: string, timeoutMs = 10_000) => {
  for (const end = Date.now() + timeoutMs; !check(); await new Promise((r) => setTimeout(r, 20))) if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
};

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
    const bad = await runCli(["serve"], { NATS_URL: nats.url, TOOLGATE_DATA_DIR: dataDir, TOOLGATE_SHUTDOWN_TIMEOUT_MS: "soon", TOOLGATE_STREAM_REPLICAS: "7" });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('TOOLGATE_SHUTDOWN_TIMEOUT_MS="soon": Invalid input: expected number, received NaN (allowed: integer 1000..600000)');
    expect(bad.stderr).toContain('TOOLGATE_STREAM_REPLICAS="7"');
    expect(bad.stderr).toContain("(allowed: integer 1..5)");
    const seed = await runCli(["serve"], { NATS_URL: nats.url, NATS_NKEY_SEED_FILE: join(dataDir, "missing.nk") });
    expect(seed.code).toBe(1);
    expect(seed.stderr).toContain(`NATS_NKEY_SEED_FILE: cannot read ${join(dataDir, "missing.nk")}`);
    const both = await runCli(["serve"], { TOOLGATE_IDENTITIES: "[]", TOOLGATE_IDENTITIES_FILE: "/x" });
    expect(both.stderr).toContain("TOOLGATE_IDENTITIES_FILE=\"/x\": set only one of TOOLGATE_IDENTITIES and TOOLGATE_IDENTITIES_FILE");
    const url = await runCli(["serve"], { NATS_URL: "http://example.com/nats" });
    expect(url.stderr).toContain('NATS_URL="http://example.com/nats": not a comma-separated list of NATS servers');
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
    // A request whose body is still arriving when the signal comes: in flight, not yet handled.
    const inFlight = request({ hostname, port, method: "POST", path: "/v1/bindings", headers: { authorization: `Bearer ${ADMIN_KEY}`, "content-type": "application/json", "content-length": Buffer.byteLength(body) } });
    const response = new Promise<{ status: number; body: string; connection?: string }>((resolve, reject) => {
      inFlight.on("response", (res) => {
        let text = "";
        res.setEncoding("utf8").on("data", (c: string) => (text += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text, connection: res.headers.connection }));
      });
      inFlight.on("error", reject);
    });
    inFlight.write(body.slice(0, 10));
    await new Promise((r) => setTimeout(r, 200));

    gw.child.kill("SIGTERM");
    await until(() => gw.logs.some((l) => l.includes("stopping: finishing in-flight work")), "the stop log line");
    await new Promise((r) => setTimeout(r, 300));
    await expect(fetch(`${gw.url}/healthz`)).rejects.toThrow();

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
