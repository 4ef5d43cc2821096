import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { McpExecutor } from "../../src/mcp-executor/index.js";
import { startTestNats, type TestNats } from "../helpers/nats.js";
import { runCli } from "../helpers/serve.js";
import { until } from "../helpers/until.js";
import { startExecutionGateway, SHORT_LEASES, type TestGateway } from "../helpers/execution-gateway.js";
import { publishMcpServer, referenceServer, registerExecutor, settled, toolCall } from "./helpers.js";

/** A port nothing listens on right now (the server-everything HTTP transport takes a fixed PORT). */
async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const { port } = probe.address() as { port: number };
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

describe("MCP executor over Streamable HTTP (server-everything's streamableHttp transport)", () => {
  let nats: TestNats;
  let gw: TestGateway;
  let dir: string;
  let server: ChildProcess;
  let url: string;
  let executor: McpExecutor;

  beforeAll(async () => {
    const port = await freePort();
    url = `http://127.0.0.1:${port}/mcp`;
    server = spawn(process.execPath, [referenceServer("@modelcontextprotocol/server-everything"), "streamableHttp"], {
      env: { PATH: process.env.PATH ?? "", PORT: String(port) },
      stdio: "ignore",
    });
    nats = await startTestNats();
    gw = await startExecutionGateway(nats.url, SHORT_LEASES);
    dir = mkdtempSync(join(tmpdir(), "toolgate-mcp-http-"));
    await until("the HTTP MCP server to listen", async () => ((await fetch(url, { method: "GET" }).catch(() => undefined)) ? true : undefined));
  });

  afterAll(async () => {
    await executor?.close({ deadlineMs: 1_000 });
    server?.kill("SIGKILL");
    await gw?.close();
    await nats?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("'mcp import --url' prints the toolset version without publishing anything", async () => {
    const res = await runCli(["mcp", "import", "--scope", "web", "--binding", "web-write", "--toolset", "web-tools", "--prefix", "everything", "--url", url]);
    expect(res.code, res.stderr).toBe(0);
    const printed = JSON.parse(res.stdout);
    expect(printed.version.tools.find((t: { name: string }) => t.name === "everything.get-sum")).toMatchObject({
      binding_id: "web-write-read",
      max_result_context_bytes: 16_384,
    });
    expect((await gw.api("GET", "/v1/bindings")).bindings).toEqual([]);
  });

  it("serves a call through the library's McpExecutor with the prefixed name", async () => {
    const { sessionId } = await publishMcpServer(gw, {
      toolset: "web-tools",
      agent: "web-agent",
      importArgs: ["--scope", "web", "--binding", "web-write", "--prefix", "everything", "--url", url],
    });
    await registerExecutor(gw, "mcp-web-1", "web", ["web-write", "web-write-read"]);
    executor = await McpExecutor.start({
      server: { url },
      scope: "web",
      binding: "web-write",
      prefix: "everything",
      natsUrl: nats.url,
      executorId: "mcp-web-1",
      store: join(dir, "executor.db"),
      logger: pino({ level: "silent" }),
      pullExpiresMs: 1_000,
      releaseDelayMs: 100,
    });
    const { runId, assignmentId } = await toolCall(gw, sessionId, "everything.get-sum", { a: 2, b: 40 });
    expect((await settled(gw, assignmentId)).state).toBe("completed");
    expect((await gw.api("GET", `/v1/runs/${runId}/history`)).tool_calls[0].context_preview.result).toEqual({
      content: [{ type: "text", text: "The sum of 2 and 40 is 42." }],
    });
  });

  it("'mcp import' refuses to publish without a gateway or API key, naming what to set", async () => {
    const res = await runCli(["mcp", "import", "--scope", "web", "--binding", "web-write", "--toolset", "x", "--publish", "--url", url]);
    expect(res.code).toBe(2);
    expect(res.stderr).toContain("--publish needs the gateway: pass --gateway URL or set TOOLGATE_URL");
  });
});
