import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createGateway, type Gateway } from "../../src/gateway/gateway.js";
import { gatewayConfigFromEnv } from "../../src/gateway/config.js";
import { STATUS_KEYS } from "../../src/budget/index.js";
import { startTestNats, type TestNats } from "../helpers/nats.js";
import { admin, ADMIN_KEY, bearer } from "../helpers/gateway.js";

describe("console static files", () => {
  let nats: TestNats;
  let gw: Gateway;
  let dataDir: string;
  const logs: string[] = [];

  beforeAll(async () => {
    nats = await startTestNats();
    dataDir = mkdtempSync(join(tmpdir(), "toolgate-console-"));
    const config = gatewayConfigFromEnv({
      NATS_URL: nats.url,
      TOOLGATE_HTTP_PORT: "0",
      TOOLGATE_DATA_DIR: dataDir,
      TOOLGATE_IDENTITIES: JSON.stringify([admin]),
    });
    // Everything the gateway logs, at the most verbose level, to check what it never logs.
    gw = await createGateway({ config, logger: pino({ level: "trace" }, { write: (line: string) => void logs.push(line) }) });
  });
  afterAll(async () => {
    await gw?.close();
    await nats?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const get = (url: string, headers: Record<string, string> = {}) => gw.app.inject({ method: "GET", url, headers });

  it("serves the page without a key, under a strict content security policy", async () => {
    const redirect = await get("/console");
    expect([redirect.statusCode, redirect.headers.location]).toEqual([308, "console/"]);
    const page = await get("/console/");
    expect(page.statusCode).toBe(200);
    expect(page.headers["content-type"]).toBe("text/html; charset=utf-8");
    expect(page.headers["content-security-policy"]).toContain("script-src 'self'");
    expect(page.headers["content-security-policy"]).toContain("connect-src 'self'");
    expect(page.headers["x-content-type-options"]).toBe("nosniff");
    expect(page.body).toContain('<script type="module" src="console.js"></script>');
    expect(page.body).not.toMatch(/https?:\/\//); // nothing from the network: works offline
    expect((await get("/console/index.html")).body).toBe(page.body);
  });

  it("serves its script, style and the budget engine's and estimator's settings", async () => {
    const script = await get("/console/console.js");
    expect([script.statusCode, script.headers["content-type"]]).toEqual([200, "text/javascript; charset=utf-8"]);
    expect(script.body).not.toMatch(/\.(innerHTML|outerHTML)\s*=|insertAdjacentHTML|document\.write/); // results are untrusted: text nodes only
    expect((await get("/console/console.css")).headers["content-type"]).toBe("text/css; charset=utf-8");
    const settings = (await get("/console/settings.json")).json();
    expect(settings).toEqual({ status_keys: [...STATUS_KEYS], status_key_suffix: "_id", min_calibration_reports: 3 });
  });

  it("serves only its own files", async () => {
    for (const url of ["/console/nope.js", "/console/..%2Fpackage.json", "/console/%2e%2e/package.json", "/console/assets/index.html"]) {
      const res = await get(url);
      expect([res.statusCode, res.json().error.code], url).toEqual([404, "route_not_found"]);
    }
  });

  it("never logs the API key the page sends", async () => {
    expect((await get("/v1/bindings", bearer(ADMIN_KEY))).statusCode).toBe(200);
    expect((await get("/v1/bindings", bearer(`${ADMIN_KEY}-wrong`))).statusCode).toBe(401);
    expect(logs.length).toBeGreaterThan(0);
    expect(logs.join("\n")).not.toContain(ADMIN_KEY);
  });
});
