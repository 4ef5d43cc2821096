import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, nkeyAuthenticator, nkeys } from "@nats-io/transport-node";
import { ExecutorSchema } from "../../src/executors/schemas.js";
import { createLogger } from "../../src/log/logger.js";
import { ToolRunner } from "../../src/runner/index.js";
import { SqliteRunnerStore } from "../../src/runner/sqlite-store.js";
import { startNatsServer, type NatsServerProcess } from "../../src/nats/nats-server-process.js";
import { renderNatsAuth } from "../../src/security/nats-auth.js";
import { executorInboxPrefix } from "../../src/wire/subjects.js";
import { ADMIN_KEY, seedSession } from "../helpers/execution-gateway.js";
import { registerExecutor } from "../helpers/registry.js";
import { ProtocolExecutor } from "../helpers/protocol-executor.js";
import { until } from "../helpers/until.js";
import { lineSink, startCapturedGateway, type CapturedGateway } from "./helpers.js";

/** Full flows at debug level (gateway, protocol executor, ToolRunner); then no log line may contain the API key, a seed or a claim token. */
describe("secrets never reach the logs", () => {
  const dir = mkdtempSync(join(tmpdir(), "toolgate-secrets-"));
  const gatewayKey = nkeys.createUser();
  const executorKey = nkeys.createUser();
  const runnerKey = nkeys.createUser();
  const seed = (k: typeof gatewayKey) => new TextDecoder().decode(k.getSeed());
  let server: NatsServerProcess;
  let gw: CapturedGateway;

  beforeAll(async () => {
    const at = new Date().toISOString();
    const executors = [
      ExecutorSchema.parse({ executor_id: "ex-1", scope: "sec", nkeys: [executorKey.getPublicKey()], created_at: at, updated_at: at }),
      ExecutorSchema.parse({ executor_id: "runner-1", scope: "sec-run", nkeys: [runnerKey.getPublicKey()], created_at: at, updated_at: at }),
    ];
    writeFileSync(join(dir, "auth.conf"), renderNatsAuth({ gatewayNkeys: [gatewayKey.getPublicKey()], executors }));
    writeFileSync(join(dir, "runner.seed"), seed(runnerKey), { mode: 0o600 });
    writeFileSync(join(dir, "gateway.seed"), seed(gatewayKey), { mode: 0o600 });
    server = await startNatsServer({ args: ["-c", join(dir, "auth.conf")] });
    gw = await startCapturedGateway(server.url, { NATS_NKEY_SEED_FILE: join(dir, "gateway.seed") }, "debug");
  });
  afterAll(async () => {
    await gw?.close();
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("keeps keys, seeds and claim tokens out of every line", async () => {
    const sessionId = await seedSession(gw.gateway.store, { scope: "sec", agent: "sec-bot", tools: [{ name: "tasks.read", binding_id: "b-sec" }] });
    const nc = await connect({ servers: server.url, authenticator: nkeyAuthenticator(executorKey.getSeed()), inboxPrefix: executorInboxPrefix("sec", "ex-1") });
    await registerExecutor(gw.gateway.nc, { executor_id: "ex-1", scope: "sec", nkeys: [executorKey.getPublicKey()], bindings: ["b-sec"] });
    const exec = new ProtocolExecutor(nc, "sec", "ex-1", ["b-sec"], { register: false });
    const http = (method: "GET" | "POST", url: string, payload?: object) =>
      gw.gateway.app.inject({ method, url, headers: { authorization: `Bearer ${ADMIN_KEY}` }, ...(payload ? { payload } : {}) });
    try {
      expect((await exec.heartbeat()).status).toBe("ok");
      const run = JSON.parse((await http("POST", `/v1/sessions/${sessionId}/runs`)).body).run_id;
      const id = JSON.parse((await http("POST", `/v1/runs/${run}/tool-calls`, { tool_name: "tasks.read", arguments: {} })).body).assignment.assignment_id;
      const tokens: string[] = [];
      const reply = await exec.claim(id, (await exec.pullFor(id)).generation);
      if (reply.status !== "granted") throw new Error(reply.reason);
      tokens.push(reply.grant.claim_token);
      await exec.send(exec.accepted(reply.grant));
      await exec.send(exec.receipt(reply.grant, { kind: "completed", result: { ok: true } }));
      // Refused input is logged too: a forged token and a wrong key must not be echoed either.
      const forged = "forged-token-0123456789abcdefghijklmnopqrstuvwxyz";
      tokens.push(forged);
      expect((await exec.send(exec.receipt(reply.grant, { kind: "completed", result: {} }, undefined, forged))).status).toBe("rejected");
      const wrongKey = "wrong-api-key-0123456789abcdef";
      expect((await gw.gateway.app.inject({ method: "GET", url: "/v1/bindings", headers: { authorization: `Bearer ${wrongKey}` } })).statusCode).toBe(401);
      await http("GET", `/v1/runs/${run}/history`);

      expect(gw.lines.length).toBeGreaterThan(10);
      expect(gw.gateway.app.log.level).toBe("debug");
      for (const secret of [ADMIN_KEY, wrongKey, seed(gatewayKey), seed(executorKey), ...tokens]) {
        const leaked = gw.lines.filter((l) => l.includes(secret));
        expect(leaked, `a log line contains a secret`).toEqual([]);
      }
    } finally {
      exec.close();
      await nc.close();
    }
  });

  it("keeps them out of the ToolRunner's own lines at debug level too", async () => {
    const sessionId = await seedSession(gw.gateway.store, {
      scope: "sec-run",
      agent: "sec-runner-bot",
      tools: [
        { name: "tasks.read", binding_id: "b-sec-read" },
        { name: "tasks.create", binding_id: "b-sec-write", tool_kind: "write" },
      ],
    });
    await registerExecutor(gw.gateway.nc, {
      executor_id: "runner-1",
      scope: "sec-run",
      nkeys: [runnerKey.getPublicKey()],
      bindings: ["b-sec-read", "b-sec-write"],
    });
    const sink = lineSink();
    const store = new SqliteRunnerStore(join(dir, "runner.db"));
    const runner = await ToolRunner.start({
      natsUrl: server.url,
      credentials: { NATS_NKEY_SEED_FILE: join(dir, "runner.seed") },
      executorId: "runner-1",
      scope: "sec-run",
      store,
      logger: createLogger({ name: "toolgate-runner", level: "debug", destination: sink.stream }),
      // Refuses one call, so the refusal path logs as well.
      authorize: (grant) => (grant.arguments as { title?: string }).title !== "refuse me" || { allowed: false, reason: "not for this user" },
      answerTimeoutMs: 500,
      pullExpiresMs: 1_000,
      tools: {
        "tasks.read": { kind: "read", bindingId: "b-sec-read", handler: async (ctx) => (await ctx.progress({ step: 1 }), { ok: true }) },
        "tasks.create": { kind: "write", bindingId: "b-sec-write", handler: async () => ({ created: true }) },
      },
    });
    const http = (method: "GET" | "POST", url: string, payload?: object) =>
      gw.gateway.app.inject({ method, url, headers: { authorization: `Bearer ${ADMIN_KEY}` }, ...(payload ? { payload } : {}) });
    try {
      const run = JSON.parse((await http("POST", `/v1/sessions/${sessionId}/runs`)).body).run_id;
      const call = async (tool_name: string, args: object) =>
        JSON.parse((await http("POST", `/v1/runs/${run}/tool-calls`, { tool_name, arguments: args })).body).assignment.assignment_id as string;
      const ids = [await call("tasks.read", {}), await call("tasks.create", { title: "refuse me" })];
      const states = await until(
        "both calls settled",
        async () => {
          const got = await Promise.all(ids.map(async (id) => JSON.parse((await http("GET", `/v1/assignments/${id}`)).body).state as string));
          return got.every((st) => st === "completed" || st === "failed") ? got : undefined;
        },
        20_000,
      );
      expect(states).toEqual(["completed", "failed"]);
      const tokens = await Promise.all(ids.map(async (id) => (await store.getAssignment(id))!.grant.claim_token));

      await runner.close({ deadlineMs: 1_000 });
      expect(sink.lines.some((l) => l.includes('"level":20'))).toBe(true); // debug lines were written
      expect(sink.lines.some((l) => l.includes("grant refused before any side effect"))).toBe(true);
      for (const secret of [ADMIN_KEY, seed(runnerKey), seed(gatewayKey), ...tokens]) {
        expect(
          sink.lines.filter((l) => l.includes(secret)),
          "a runner log line contains a secret",
        ).toEqual([]);
        expect(
          gw.lines.filter((l) => l.includes(secret)),
          "a gateway log line contains a secret",
        ).toEqual([]);
      }
    } finally {
      await runner.close({ deadlineMs: 1_000 });
    }
  });
});
