import { spawnSync } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { gatewayConfigFromEnv, GatewayConfigError } from "../../src/gateway/config.js";
import type { Gateway } from "../../src/gateway/gateway.js";
import { TokenBuckets } from "../../src/http/rate-limit.js";
import { startTestNats, type TestNats } from "../helpers/nats.js";
import { ADMIN_KEY, admin, bearer, startTestGateway } from "../helpers/gateway.js";

const OTHER_KEY = "test-other-key-0123456789abcdef";

describe("rate limits per API identity", () => {
  it("refills at the configured rate up to the burst, and says when the next token comes", () => {
    let now = 0;
    const buckets = new TokenBuckets(2, 3, () => now);
    for (let i = 0; i < 3; i++) expect(buckets.take("a")).toEqual({ ok: true });
    expect(buckets.take("a")).toEqual({ ok: false, retryAfterSeconds: 1 });
    expect(buckets.take("b")).toEqual({ ok: true });
    now = 500; // half a second at 2/s: one token
    expect(buckets.take("a")).toEqual({ ok: true });
    expect(buckets.take("a").ok).toBe(false);
    now = 60_000; // never more than the burst, however long the pause
    for (let i = 0; i < 3; i++) expect(buckets.take("a").ok).toBe(true);
    expect(buckets.take("a").ok).toBe(false);
    const slow = new TokenBuckets(0.1, 1, () => 0);
    slow.take("c");
    expect(slow.take("c")).toEqual({ ok: false, retryAfterSeconds: 10 });
  });

  it.each([
    ["TOOLGATE_RATE_LIMIT_RPS", "0"],
    ["TOOLGATE_RATE_LIMIT_RPS", "-5"],
    ["TOOLGATE_RATE_LIMIT_RPS", "fast"],
    ["TOOLGATE_RATE_LIMIT_BURST", "0"],
    ["TOOLGATE_RATE_LIMIT_BURST", "2.5"],
    ["TOOLGATE_RATE_LIMIT_BURST", "99999999"],
    ["TOOLGATE_MAX_CLAIMS_PER_EXECUTOR", "0"],
    ["TOOLGATE_MAX_CLAIMS_PER_EXECUTOR", "5000"],
  ])("refuses %s=%s at start, naming the variable and the value", (name, value) => {
    const start = () => gatewayConfigFromEnv({ NATS_URL: "nats://127.0.0.1:4222", TOOLGATE_IDENTITIES: "[]", [name]: value });
    expect(start).toThrow(GatewayConfigError);
    expect(start).toThrow(`${name}=${JSON.stringify(value)}`);
  });

  it("stops `toolgate serve` on a bad value with the message, before connecting anywhere", () => {
    const main = JSON.stringify(new URL("../../src/cli/main.ts", import.meta.url).href);
    const child = spawnSync(process.execPath, ["--import", "tsx", "-e", `import(${main}).then((cli) => cli.main(["serve"]))`], {
      env: { ...process.env, NATS_URL: "nats://127.0.0.1:1", TOOLGATE_IDENTITIES: "[]", TOOLGATE_RATE_LIMIT_BURST: "none" },
      encoding: "utf8",
      timeout: 30_000,
    });
    expect(child.status).toBe(1);
    expect(child.stderr).toContain('TOOLGATE_RATE_LIMIT_BURST="none"');
    expect(child.stderr).toContain("invalid gateway configuration");
  });

  describe("on the HTTP API", () => {
    let nats: TestNats;
    let gateway: Gateway;
    let now = Date.now();

    beforeAll(async () => {
      nats = await startTestNats();
      const other = { name: "other", key: OTHER_KEY, agents: "*" as const, permissions: ["configuration:read" as const] };
      gateway = await startTestGateway(nats.url, [admin, other], {
        env: { TOOLGATE_RATE_LIMIT_RPS: "1", TOOLGATE_RATE_LIMIT_BURST: "3" },
        rateLimitClock: () => now,
      });
    });
    afterAll(async () => {
      await gateway?.close();
      await nats?.stop();
    });

    const get = (key: string) => gateway.app.inject({ method: "GET", url: "/v1/bindings", headers: bearer(key) });

    it("answers 429 rate_limited with Retry-After past the burst, for that identity only", async () => {
      for (let i = 0; i < 3; i++) expect((await get(ADMIN_KEY)).statusCode).toBe(200);
      const limited = await get(ADMIN_KEY);
      expect(limited.statusCode).toBe(429);
      expect(limited.headers["retry-after"]).toBe("1");
      expect(JSON.parse(limited.body).error).toMatchObject({ code: "rate_limited" });
      expect(JSON.parse(limited.body).error.message).toContain("'admin'");
      // One identity's burst does not limit another's.
      for (let i = 0; i < 3; i++) expect((await get(OTHER_KEY)).statusCode).toBe(200);
      expect((await get(OTHER_KEY)).statusCode).toBe(429);
      // Unauthenticated requests are refused before the limiter: they cannot drain an identity's bucket.
      expect((await get("not-a-key-0123456789")).statusCode).toBe(401);
      // The bucket refills with the clock, not with the requests: a second at 1/s brings one token back.
      expect((await get(ADMIN_KEY)).statusCode).toBe(429);
      now += 1_000;
      expect((await get(ADMIN_KEY)).statusCode).toBe(200);
      expect((await get(ADMIN_KEY)).statusCode).toBe(429);
    });
  });
});
