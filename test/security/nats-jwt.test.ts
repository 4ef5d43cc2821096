import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pino } from "pino";
import { connect } from "@nats-io/transport-node";
import { createAccount, createOperator, createUser, encodeAccount, encodeOperator, encodeUser, fmtCreds, type Export, type Import } from "@nats-io/jwt";
import { GatewayConfigError, gatewayConfigFromEnv } from "../../src/gateway/config.js";
import { startNatsServer, type NatsServerProcess } from "../../src/nats/nats-server-process.js";
import { ToolRunner } from "../../src/runner/index.js";
import { EXECUTOR_EXPORTS, executorPermissions } from "../../src/security/nats-auth.js";
import { seedSession, startExecutionGateway, type TestGateway } from "../helpers/execution-gateway.js";
import { runCli } from "../helpers/serve.js";
import { until } from "../helpers/until.js";

/**
 * A nats-server in operator (decentralised JWT) mode, laid out as docs/nats-accounts.md says: an
 * operator, a system account, the gateway's account TOOLGATE with JetStream exporting the protocol
 * subjects, the executors' account EXECUTORS importing them, one user each, `.creds` files. The
 * gateway, the CLI and a ToolRunner connect with NATS_CREDS_FILE and carry a tool call end to end.
 */
const SCOPE = "tasks-product";
const EXECUTOR = "exec-jwt";

describe("NATS in operator/JWT mode with .creds files", () => {
  const dir = mkdtempSync(join(tmpdir(), "toolgate-jwt-"));
  const gatewayCreds = join(dir, "gateway.creds");
  const executorCreds = join(dir, "executor.creds");
  let server: NatsServerProcess;
  let gw: TestGateway;
  let runner: ToolRunner;

  beforeAll(async () => {
    const operator = createOperator();
    const system = createAccount();
    const toolgate = createAccount();
    const executors = createAccount();
    const unlimited = { subs: -1, data: -1, payload: -1, conn: -1, leaf: -1, imports: -1, exports: -1, wildcards: true };
    const signer = { signer: operator };
    const exports: Export[] = EXECUTOR_EXPORTS.map((e) => ({
      name: e.subject,
      subject: e.subject,
      type: e.kind,
      ...(e.responseType ? { response_type: "Stream" as const } : {}),
    }));
    const imports: Import[] = EXECUTOR_EXPORTS.map((e) => ({
      name: e.subject,
      subject: e.subject,
      account: toolgate.getPublicKey(),
      type: e.kind,
      ...(e.importAs ? { local_subject: e.importAs } : {}),
      // The requester's nkey reaches the gateway (Nats-Request-Info), where the registry checks it.
      ...(e.share ? { share: true } : {}),
    }));
    const accounts = {
      [system.getPublicKey()]: await encodeAccount("SYS", system, { limits: unlimited }, signer),
      [toolgate.getPublicKey()]: await encodeAccount(
        "TOOLGATE",
        toolgate,
        { limits: { ...unlimited, mem_storage: -1, disk_storage: -1, streams: -1, consumer: -1 }, exports },
        signer,
      ),
      [executors.getPublicKey()]: await encodeAccount("EXECUTORS", executors, { limits: unlimited, imports }, signer),
    };
    const config = [
      `operator: ${await encodeOperator("toolgate-test", operator, { system_account: system.getPublicKey() })}`,
      `system_account: ${system.getPublicKey()}`,
      "resolver: MEMORY",
      "resolver_preload: {",
      ...Object.entries(accounts).map(([key, jwt]) => `  ${key}: ${jwt}`),
      "}",
    ].join("\n");
    writeFileSync(join(dir, "operator.conf"), config);

    const gatewayUser = createUser();
    writeFileSync(gatewayCreds, fmtCreds(await encodeUser("gateway", gatewayUser, toolgate), gatewayUser), { mode: 0o600 });
    const executorUser = createUser();
    const allowed = executorPermissions(SCOPE, EXECUTOR);
    const executorJwt = await encodeUser("exec-jwt", executorUser, executors, { pub: { allow: allowed.publish }, sub: { allow: allowed.subscribe } });
    writeFileSync(executorCreds, fmtCreds(executorJwt, executorUser), { mode: 0o600 });

    server = await startNatsServer({ args: ["-c", join(dir, "operator.conf")] });
    gw = await startExecutionGateway(server.url, {}, { NATS_CREDS_FILE: gatewayCreds });
  });

  afterAll(async () => {
    await runner?.close({ deadlineMs: 2_000 });
    await gw?.close();
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("docs/nats-accounts.md lists every export, its import name and an executor's allow lists as nats-config makes them", () => {
    const doc = readFileSync("docs/nats-accounts.md", "utf8");
    for (const e of EXECUTOR_EXPORTS) {
      const row = doc.split("\n").find((l) => l.startsWith(`| ${e.kind} | \`${e.subject}\` |`));
      expect(row, e.subject).toBeDefined();
      expect(row).toContain(e.importAs ? `\`${e.importAs}\`` : "| same |");
      if (e.responseType) expect(row).toContain("**stream**");
    }
    const { publish, subscribe } = executorPermissions("S", "E");
    for (const subject of [...publish, ...subscribe]) expect(doc).toContain(`\`${subject}\``);
  });

  it("refuses a connection without credentials (the server is in operator mode)", async () => {
    await expect(connect({ servers: server.url, maxReconnectAttempts: 0 })).rejects.toThrow(/Authorization Violation/i);
  });

  it("stops at start on a NATS_CREDS_FILE that is no .creds file, or beside a seed", () => {
    writeFileSync(join(dir, "not.creds"), "hello");
    expect(() => gatewayConfigFromEnv({ NATS_CREDS_FILE: join(dir, "not.creds") })).toThrow(GatewayConfigError);
    expect(() => gatewayConfigFromEnv({ NATS_CREDS_FILE: join(dir, "not.creds") })).toThrow(
      `NATS_CREDS_FILE ${join(dir, "not.creds")} is not a NATS .creds file`,
    );
    expect(() => gatewayConfigFromEnv({ NATS_CREDS_FILE: gatewayCreds, NATS_NKEY_SEED_FILE: gatewayCreds })).toThrow(
      "set only one of NATS_NKEY_SEED, NATS_NKEY_SEED_FILE and NATS_CREDS_FILE",
    );
  });

  it("the CLI reads the streams the gateway made in its account", async () => {
    const status = await runCli(["status", "--json"], { NATS_URL: server.url, NATS_CREDS_FILE: gatewayCreds });
    expect(status.code, status.stderr).toBe(0);
    expect(JSON.parse(status.stdout).jetstream.streams.length).toBeGreaterThan(0);
  });

  it("a ToolRunner in the executors' account completes a tool call through the imports", async () => {
    const sessionId = await seedSession(gw.gateway.store, { scope: SCOPE, agent: "bot", tools: [{ name: "tasks.read", binding_id: "tasks-read" }] });
    // The registry decides claims: the executor registered with its binding. No nkey: the gateway
    // trusts Nats-Request-Info only from the account named EXECUTORS, and under operator/JWT accounts
    // the server names the account by its public key, so a registered nkey would be identity_mismatch.
    const registered = await gw.http("POST", "/v1/executors", { executor_id: EXECUTOR, scope: SCOPE, bindings: ["tasks-read"], nkeys: [] });
    expect(registered.status, JSON.stringify(registered.body)).toBeLessThan(300);
    runner = await ToolRunner.start({
      natsUrl: server.url,
      credentials: { NATS_CREDS_FILE: executorCreds },
      executorId: EXECUTOR,
      scope: SCOPE,
      store: join(dir, "runner.db"),
      logger: pino({ level: "silent" }),
      authorize: () => true,
      requestTimeoutMs: 2_000,
      pullExpiresMs: 1_000,
      tools: {
        "tasks.read": { kind: "read", bindingId: "tasks-read", handler: async () => ({ tasks: [], via: "jwt" }) },
      },
    });
    const run = (await gw.http("POST", `/v1/sessions/${sessionId}/runs`)).body.run_id as string;
    const created = await gw.http("POST", `/v1/runs/${run}/tool-calls`, { tool_name: "tasks.read", arguments: {} });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.assignment.assignment_id as string;
    const done = await until("the tool call completed", async () => {
      const a = (await gw.http("GET", `/v1/assignments/${id}`)).body;
      return a.state === "completed" ? a : undefined;
    });
    expect(done.context_preview.result).toEqual({ tasks: [], via: "jwt" });
  });
});
