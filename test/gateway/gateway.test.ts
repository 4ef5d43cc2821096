import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { gatewayConfigFromEnv, GatewayConfigError } from "../../src/gateway/config.js";
import { startTestNats, type TestNats } from "../helpers/nats.js";
import { ADMIN_KEY, bearer, bindingExample, startTestGateway, tasksRead } from "../helpers/gateway.js";
import { serve } from "../helpers/serve.js";
import { until } from "../helpers/until.js";

describe("gateway", () => {
  let nats: TestNats;
  const dirs: string[] = [];
  const tempDir = () => {
    const d = mkdtempSync(join(tmpdir(), "toolgate-serve-"));
    dirs.push(d);
    return d;
  };

  beforeAll(async () => {
    nats = await startTestNats();
  });
  afterAll(async () => {
    await nats?.stop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it("keeps all configuration across a restart", async () => {
    const first = await startTestGateway(nats.url);
    const h = bearer(ADMIN_KEY);
    await first.app.inject({ method: "POST", url: "/v1/bindings", headers: h, payload: bindingExample });
    await first.app.inject({ method: "POST", url: "/v1/toolsets/tasks/versions", headers: h, payload: { version: "v1", tools: [tasksRead] } });
    await first.app.inject({
      method: "POST",
      url: "/v1/agents/bot/versions",
      headers: h,
      payload: { toolset: "tasks", toolset_version: "v1", max_context_tokens: 1000 },
    });
    const session = (await first.app.inject({ method: "POST", url: "/v1/sessions", headers: h, payload: { agent_version: "bot.1", subject: "u" } })).json();
    await first.close();

    const second = await startTestGateway(nats.url);
    try {
      const get = async (url: string) => (await second.app.inject({ method: "GET", url, headers: h })).json();
      expect((await get("/v1/bindings")).bindings).toEqual([expect.objectContaining(bindingExample)]);
      expect((await get("/v1/toolsets/tasks/versions/v1")).tools[0].name).toBe("tasks.read");
      expect((await get("/v1/agent-versions/bot.1")).toolset_version).toBe("v1");
      expect(await get(`/v1/sessions/${session.session_id}`)).toEqual(session);
      const next = await second.app.inject({
        method: "POST",
        url: "/v1/agents/bot/versions",
        headers: h,
        payload: { toolset: "tasks", toolset_version: "v1", max_context_tokens: 1000 },
      });
      expect(next.json().agent_version).toBe("bot.2");
      expect((await second.app.inject({ method: "GET", url: "/readyz" })).json().ready).toBe(true);
    } finally {
      await second.close();
    }
  });

  it("stops on a bad environment value with the variable's name", () => {
    expect(() => gatewayConfigFromEnv({ TOOLGATE_HTTP_PORT: "eighty" })).toThrow(GatewayConfigError);
    expect(() => gatewayConfigFromEnv({ TOOLGATE_HTTP_PORT: "eighty" })).toThrow(/TOOLGATE_HTTP_PORT="eighty"/);
    expect(() => gatewayConfigFromEnv({ TOOLGATE_STREAM_REPLICAS: "7" })).toThrow(/TOOLGATE_STREAM_REPLICAS/);
    expect(() => gatewayConfigFromEnv({ TOOLGATE_IDENTITIES: "[]", TOOLGATE_IDENTITIES_FILE: "/x" })).toThrow(/only one/);
    expect(gatewayConfigFromEnv({})).toMatchObject({
      TOOLGATE_HTTP_PORT: 8080,
      TOOLGATE_HTTP_HOST: "127.0.0.1",
      TOOLGATE_DATA_DIR: "./.toolgate",
      TOOLGATE_STREAM_REPLICAS: 1,
    });
  });

  it("'toolgate serve' answers /healthz and exits cleanly on SIGTERM", async () => {
    const identities = JSON.stringify([{ name: "a", key: ADMIN_KEY, agents: "*", permissions: ["configuration:read"] }]);
    const { child, url, exited } = await serve({ NATS_URL: nats.url, TOOLGATE_DATA_DIR: tempDir(), TOOLGATE_IDENTITIES: identities });
    expect(await (await fetch(`${url}/healthz`)).json()).toEqual({ status: "ok" });
    expect((await fetch(`${url}/v1/bindings`, { headers: bearer(ADMIN_KEY) })).status).toBe(200);
    child.kill("SIGTERM");
    expect(await exited).toBe(0);
  });

  /**
   * npm 11 passes no SIGTERM on: `kill <pid of npx toolgate serve>` ends npx and left the gateway
   * running with nobody to stop it. Here the launcher is killed outright, as npm is gone either way.
   */
  it("'toolgate serve' started through npm stops as on SIGTERM once the npm process that started it is gone", async () => {
    const env = {
      PATH: process.env.PATH ?? "",
      npm_command: "exec",
      NATS_URL: nats.url,
      TOOLGATE_HTTP_PORT: "0",
      TOOLGATE_DATA_DIR: tempDir(),
      TOOLGATE_IDENTITIES: JSON.stringify([{ name: "a", key: ADMIN_KEY, agents: "*", permissions: ["configuration:read"] }]),
    };
    // The launcher starts the gateway as npx does (its stderr is the launcher's, so the test reads it) and stays.
    const launch = `require("node:child_process").spawn(process.execPath, ["--import", "tsx", "src/cli/run.ts", "serve"], { stdio: ["ignore", "ignore", "inherit"] }); setInterval(() => {}, 1000);`;
    const launcher = spawn(process.execPath, ["-e", launch], { env, stdio: ["ignore", "ignore", "pipe"] });
    const lines: string[] = [];
    const ended = new Promise<void>((resolve) =>
      createInterface({ input: launcher.stderr! })
        .on("line", (l) => lines.push(l))
        .once("close", resolve),
    );
    const listening = await until("the gateway listening", () =>
      lines.map((l) => JSON.parse(l) as { msg?: string; pid?: number }).find((e) => e.msg === "gateway listening"),
    );
    launcher.kill("SIGKILL");
    await ended; // the gateway, the last holder of the pipe, has exited
    const said = lines.map((l) => (JSON.parse(l) as { msg: string }).msg);
    expect(said).toContain("the npm process that started the gateway is gone (npm passes no SIGTERM on): stopping as on SIGTERM");
    expect(said.at(-1)).toBe("gateway stopped");
    // Gone: no such process, or one that exited and waits to be reaped by whoever adopted it.
    const exited = () => {
      try {
        return readFileSync(`/proc/${listening.pid}/stat`, "utf8").split(") ")[1]?.startsWith("Z") ? true : undefined;
      } catch {
        return true;
      }
    };
    expect(await until("the gateway's process gone", exited)).toBe(true);
  });

  it("on a first local run starts an embedded nats-server and a 0600 admin key, logging where, not what", async () => {
    const dataDir = tempDir();
    const { child, url, logs, exited } = await serve({ TOOLGATE_DATA_DIR: dataDir });
    const keyFile = join(dataDir, "admin.key");
    const key = readFileSync(keyFile, "utf8").trim();
    expect(statSync(keyFile).mode & 0o777).toBe(0o600);
    expect(logs.join("\n")).toContain(keyFile);
    expect(logs.join("\n")).not.toContain(key);
    expect(logs.some((l) => l.includes("started an embedded nats-server"))).toBe(true);
    const res = await fetch(`${url}/v1/bindings`, {
      method: "POST",
      headers: { ...bearer(key), "content-type": "application/json" },
      body: JSON.stringify(bindingExample),
    });
    expect(res.status).toBe(201);
    child.kill("SIGTERM");
    expect(await exited).toBe(0);

    const again = await serve({ TOOLGATE_DATA_DIR: dataDir });
    expect(again.logs.join("\n")).toContain("using the local admin key file");
    expect(
      ((await (await fetch(`${again.url}/v1/bindings/binding_example`, { headers: bearer(key) })).json()) as { executor_scope: string }).executor_scope,
    ).toBe("tasks-product");
    again.child.kill("SIGTERM");
    expect(await again.exited).toBe(0);
  });
});
