import { spawnSync } from "node:child_process";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createGateway, type Gateway } from "../../src/gateway/gateway.js";
import { gatewayConfigFromEnv } from "../../src/gateway/config.js";
import { createLogger } from "../../src/log/logger.js";
import { natsServerBinary, startNatsServer, type NatsServerProcess } from "../../src/nats/nats-server-process.js";
import { ToolRunner } from "../../src/runner/index.js";
import { candidateConsumer, STREAMS, subjects } from "../../src/wire/subjects.js";
import { admin, ADMIN_KEY, bearer } from "../helpers/gateway.js";
import { seedSession } from "../helpers/execution-gateway.js";
import { eventually } from "../helpers/protocol-executor.js";

const SCOPE = "tasks-product";
const GATEWAY_PASSWORD = "test-gateway-password-0123";
const EXECUTOR_PASSWORD = "test-executor-password-0123";
const passwords = { TOOLGATE_GATEWAY_NATS_PASSWORD: GATEWAY_PASSWORD, TOOLGATE_EXECUTOR_NATS_PASSWORD: EXECUTOR_PASSWORD };
const authConf = readFileSync("deploy/nats/auth.conf", "utf8");

/** The quoted subjects of one `allow: [...]` list of the executor user, in file order. */
function executorAllow(kind: "publish" | "subscribe"): string[] {
  const user = authConf.slice(authConf.indexOf(`user: executor-${SCOPE}`));
  const block = user.slice(user.indexOf(`${kind}: {`));
  const list = block.slice(block.indexOf("["), block.indexOf("]") + 1);
  return [...list.matchAll(/"([^"]+)"/g)].map((m) => m[1]!);
}

describe("deploy/nats: cluster config and authorization", () => {
  let dir: string;
  let server: NatsServerProcess;
  let gateway: Gateway;
  const conns: NatsConnection[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "toolgate-natsauth-"));
    // include paths are relative to the including file: the authorization beside a single-node config.
    copyFileSync("deploy/nats/auth.conf", join(dir, "auth.conf"));
    writeFileSync(join(dir, "server.conf"), "include auth.conf\n");
    Object.assign(process.env, passwords); // nats-server reads the passwords from its environment
    server = await startNatsServer({ args: ["-c", join(dir, "server.conf")] });
    const config = gatewayConfigFromEnv({ NATS_URL: server.url, NATS_USER: "gateway", NATS_PASSWORD: GATEWAY_PASSWORD, TOOLGATE_HTTP_PORT: "0", TOOLGATE_DATA_DIR: dir, TOOLGATE_IDENTITIES: JSON.stringify([admin]) });
    gateway = await createGateway({ config, logger: createLogger({ level: "silent" }) });
  });
  afterAll(async () => {
    for (const nc of conns) await nc.close();
    await gateway?.close();
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const asExecutor = async () => {
    const nc = await connect({ servers: server.url, user: `executor-${SCOPE}`, pass: EXECUTOR_PASSWORD });
    conns.push(nc);
    return nc;
  };

  it("nats.conf with auth.conf is valid for nats-server, and refuses to start without the passwords", () => {
    const check = (env: Record<string, string>) => spawnSync(natsServerBinary(), ["-c", "deploy/nats/nats.conf", "-t"], { env: { PATH: process.env.PATH ?? "", HOSTNAME: "nats-1", ...env }, encoding: "utf8" });
    const ok = check(passwords);
    expect(ok.status, ok.stderr).toBe(0);
    const missing = check({ TOOLGATE_GATEWAY_NATS_PASSWORD: GATEWAY_PASSWORD });
    expect(missing.status).toBe(1);
    expect(missing.stderr).toContain("TOOLGATE_EXECUTOR_NATS_PASSWORD");
    expect(authConf).not.toMatch(/password:\s*(?!\$)\S/); // only $VARIABLE references, never a literal
  });

  it("gives the executor exactly its scope's subjects, as src/wire/subjects.ts builds them", () => {
    expect(executorAllow("publish")).toEqual([
      subjects.presence(SCOPE),
      subjects.claim(SCOPE),
      subjects.receiptQuery(SCOPE),
      subjects.receipt(SCOPE, ">"),
      `$JS.API.CONSUMER.INFO.${STREAMS.candidates}.${candidateConsumer(SCOPE)}`,
      `$JS.API.CONSUMER.MSG.NEXT.${STREAMS.candidates}.${candidateConsumer(SCOPE)}`,
      `$JS.ACK.${STREAMS.candidates}.${candidateConsumer(SCOPE)}.>`,
    ]);
    expect(executorAllow("subscribe")).toEqual(["_INBOX.>", subjects.answers(SCOPE, "*"), subjects.executorControl(SCOPE, "*")]);
  });

  it("lets a ToolRunner with the executor's credentials serve a tool call end to end through the gateway user", async () => {
    const sessionId = await seedSession(gateway.store, { scope: SCOPE, agent: "auth-bot", tools: [{ name: "tasks.read", binding_id: "tasks-read" }] });
    const runner = new ToolRunner({ nc: await asExecutor(), executorId: "auth-exec-1", scope: SCOPE, store: join(dir, "runner.db"), logger: pino({ level: "silent" }), authorize: () => true, pullExpiresMs: 1_000 });
    runner.tool("tasks.read", { kind: "read", bindingId: "tasks-read", handler: async () => ({ next_cursor: null, tasks: [] }) });
    await runner.start();
    try {
      const inject = async (method: "GET" | "POST", url: string, payload?: unknown) => (await gateway.app.inject({ method, url, headers: bearer(ADMIN_KEY), ...(payload ? { payload } : {}) })).json();
      const run = await inject("POST", `/v1/sessions/${sessionId}/runs`);
      const { assignment } = await inject("POST", `/v1/runs/${run.run_id}/tool-calls`, { tool_name: "tasks.read", arguments: {} });
      const done = await eventually(async () => {
        const a = await inject("GET", `/v1/assignments/${assignment.assignment_id}`);
        return a.state === "completed" ? a : undefined;
      }, 20_000, "the tool call to complete");
      expect(done.state).toBe("completed");
    } finally {
      await runner.close({ deadlineMs: 1_000 });
    }
  });

  it("denies the executor everything outside its scope: other scopes, the JetStream API, KV, wrong passwords", async () => {
    const nc = await asExecutor();
    const denied = (subject: string) => expect(nc.request(subject, "", { timeout: 2_000 })).rejects.toThrow(`Permissions Violation for Publish to "${subject}"`);
    await denied(subjects.claim("other-scope"));
    await denied(subjects.receipt("other-scope", "a1"));
    await denied(`$JS.API.CONSUMER.MSG.NEXT.${STREAMS.candidates}.${candidateConsumer("other-scope")}`);
    await denied(`$JS.API.STREAM.INFO.${STREAMS.receipts}`);
    await denied("$KV.tg_assignments.a1");
    await denied(`$JS.API.STREAM.DELETE.${STREAMS.candidates}`);
    await expect(connect({ servers: server.url, user: `executor-${SCOPE}`, pass: "wrong" })).rejects.toThrow(/Authorization Violation/);
    await expect(connect({ servers: server.url })).rejects.toThrow(/Authorization Violation/);
  });
});
