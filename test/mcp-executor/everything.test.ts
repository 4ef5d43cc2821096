import { mkdtempSync, rmSync, symlinkSync, unlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execFileSync } from "node:child_process";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { McpExecutor } from "../../src/mcp-executor/index.js";
import { startTestNats, type TestNats } from "../helpers/nats.js";
import { SseClient } from "../helpers/sse-client.js";
import { until } from "../helpers/until.js";
import { ADMIN_KEY, startExecutionGateway, SHORT_LEASES, type TestGateway } from "../helpers/execution-gateway.js";
import { onlineExecutors, publishMcpServer, referenceImage, referenceServer, registerExecutor, settled, toolCall } from "./helpers.js";

const SCOPE = "everything";
const EXECUTOR = "mcp-everything-1";
const BUDGET = 1024;

describe("MCP executor: @modelcontextprotocol/server-everything through a real gateway", () => {
  let nats: TestNats;
  let gw: TestGateway;
  let dir: string;
  let serverScript: string;
  let executor: McpExecutor;
  let sessionId: string;
  let printed: any;
  const logs: Array<{ msg: string; [k: string]: unknown }> = [];

  beforeAll(async () => {
    nats = await startTestNats();
    gw = await startExecutionGateway(nats.url, SHORT_LEASES);
    dir = mkdtempSync(join(tmpdir(), "toolgate-mcp-everything-"));
    // Started through a link the test can take away: a restart then fails until it is back.
    serverScript = join(dir, "server-everything.js");
    symlinkSync(referenceServer("@modelcontextprotocol/server-everything"), serverScript);
    const server = ["--", process.execPath, serverScript, "stdio"];
    ({ sessionId, printed } = await publishMcpServer(gw, {
      toolset: "everything-tools",
      agent: "everything-agent",
      importArgs: [
        "--scope",
        SCOPE,
        "--binding",
        "everything-write",
        "--read-binding",
        "everything-read",
        "--max-result-context-bytes",
        String(BUDGET),
        ...server,
      ],
    }));
    await registerExecutor(gw, EXECUTOR, SCOPE, ["everything-read", "everything-write"]);
    executor = await McpExecutor.start({
      server: { command: process.execPath, args: [serverScript, "stdio"] },
      scope: SCOPE,
      binding: "everything-write",
      readBinding: "everything-read",
      natsUrl: nats.url,
      executorId: EXECUTOR,
      store: join(dir, "executor.db"),
      logger: pino({ level: "debug" }, { write: (line: string) => void logs.push(JSON.parse(line)) }),
      restart: { initialDelayMs: 100, maxDelayMs: 500 },
      answerTimeoutMs: 1_000,
      requestTimeoutMs: 2_000,
      pullExpiresMs: 1_000,
      releaseDelayMs: 100,
    });
  });

  afterAll(async () => {
    await executor?.close({ deadlineMs: 1_000 });
    await gw?.close();
    await nats?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const history = async (runId: string) => (await gw.api("GET", `/v1/runs/${runId}/history`)).tool_calls[0];

  it("imports the server's tools as a toolset version: kinds from readOnlyHint, bindings per kind, 1 KiB budgets", () => {
    const tools = new Map<string, any>(printed.published.tools.map((t: any) => [t.name, t]));
    expect(tools.get("echo")).toMatchObject({ binding_id: "everything-read", description: "Echoes back the input string", max_result_context_bytes: BUDGET });
    expect(tools.get("echo").input_schema).toEqual({
      type: "object",
      properties: { message: { type: "string", description: "Message to echo" } },
      required: ["message"],
    });
    expect(tools.get("toggle-simulated-logging").binding_id).toBe("everything-write"); // readOnlyHint: false
    expect(tools.get("get-structured-content").output_schema.properties.structuredContent.properties.temperature).toEqual({
      type: "number",
      description: "Temperature in celsius",
    });
    expect(tools.has("simulate-research-query")).toBe(false); // runs only as an MCP task
    expect(printed.bindings).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ binding_id: "everything-read", tool_kind: "read" }),
        expect.objectContaining({ binding_id: "everything-write", tool_kind: "write" }),
      ]),
    );
    expect(executor.tools.find((t) => t.name === "echo")).toMatchObject({ kind: "read", bindingId: "everything-read" });
  });

  it("echo: a text result completes and enters history as the MCP result", async () => {
    const { runId, assignmentId } = await toolCall(gw, sessionId, "echo", { message: "hello from toolgate" });
    expect((await settled(gw, assignmentId)).state).toBe("completed");
    expect((await history(runId)).context_preview).toMatchObject({
      truncated: false,
      result: { content: [{ type: "text", text: "Echo: hello from toolgate" }] },
    });
  });

  it("structuredContent completes beside its text block", async () => {
    const { runId, assignmentId } = await toolCall(gw, sessionId, "get-structured-content", { location: "Chicago" });
    expect((await settled(gw, assignmentId)).state).toBe("completed");
    const { result } = (await history(runId)).context_preview;
    expect(result.structuredContent).toEqual({ temperature: expect.any(Number), conditions: expect.any(String), humidity: expect.any(Number) });
    expect(JSON.parse(result.content[0].text)).toEqual(result.structuredContent);
  });

  it("isError: true is a confirmed failure with the tool's text as the error", async () => {
    const { assignmentId } = await toolCall(gw, sessionId, "get-resource-reference", { resourceType: "Text", resourceId: 0 });
    const a = await settled(gw, assignmentId);
    expect(a.state).toBe("failed");
    expect(a.outcome.error).toEqual({ code: "mcp_tool_error", message: "Invalid resourceId: 0. Must be a finite positive integer." });
  });

  it("an image is kept byte-exact though the result is over the budget; a long text is cut to it", async () => {
    const image = await toolCall(gw, sessionId, "get-tiny-image", {});
    expect((await settled(gw, image.assignmentId)).state).toBe("completed");
    const seen = (await history(image.runId)).context_preview;
    expect(JSON.stringify(seen.result).length).toBeGreaterThan(BUDGET);
    expect(seen.truncated).toBe(false);
    expect(seen.result.content[1]).toEqual({ type: "image", data: await referenceImage(), mimeType: "image/png" });

    const long = "x".repeat(3_000) + "THE END";
    const text = await toolCall(gw, sessionId, "echo", { message: long });
    expect((await settled(gw, text.assignmentId)).state).toBe("completed");
    const cut = (await history(text.runId)).context_preview;
    expect(cut.truncated).toBe(true);
    expect(Buffer.byteLength(JSON.stringify(cut.result))).toBeLessThanOrEqual(BUDGET);
    expect(cut.result.content[0].text).toMatch(/^Echo: x+\n\[toolgate: \d+ bytes of this text omitted, max_result_context_bytes=1024\]\nx*THE END$/);
  });

  it("MCP progress notifications become progress receipts, seen in the run's events", async () => {
    const { runId, assignmentId } = await toolCall(gw, sessionId, "trigger-long-running-operation", { duration: 1, steps: 4 });
    const events = await SseClient.open(`${gw.baseUrl}/v1/runs/${runId}/events`, { authorization: `Bearer ${ADMIN_KEY}` });
    try {
      const seen = await events.until("the operation's four progress events", (e) => e.filter((x) => x.data.type === "progress").length === 4);
      const progress = seen.filter((e) => e.data.type === "progress");
      expect(progress.map((e) => [e.data.seq, e.data.progress])).toEqual([1, 2, 3, 4].map((i) => [i, { progress: i, total: 4 }]));
    } finally {
      await events.close();
    }
    const a = await settled(gw, assignmentId);
    expect(a.progress.map((p: { seq: number }) => p.seq)).toEqual([1, 2, 3, 4]);
    expect((await history(runId)).context_preview.result.content[0].text).toBe("Long running operation completed. Duration: 1 seconds, Steps: 4.");
  });

  it("a business-task cancel of a long-running read sends notifications/cancelled and ends cancelled", async () => {
    const { assignmentId } = await toolCall(gw, sessionId, "trigger-long-running-operation", { duration: 600, steps: 600 });
    await until("the operation's first progress", async () =>
      (await gw.api("GET", `/v1/assignments/${assignmentId}`)).progress.length > 0 ? true : undefined,
    );
    await gw.api("POST", `/v1/assignments/${assignmentId}:cancel-task`, { reason: "the user changed their mind" });
    const a = await settled(gw, assignmentId);
    expect(a.state).toBe("cancelled");
    expect(a.outcome.reason).toContain("the user changed their mind");
  });

  it("the server dies mid-call: not ready (presence) until it is back, the interrupted read runs again", async () => {
    const { assignmentId } = await toolCall(gw, sessionId, "trigger-long-running-operation", { duration: 30, steps: 30 });
    await until("the operation's first progress", async () =>
      (await gw.api("GET", `/v1/assignments/${assignmentId}`)).progress.length > 0 ? true : undefined,
    );
    unlinkSync(serverScript); // restarts fail until the link is back
    const pid = Number(
      execFileSync("pgrep", ["-P", String(process.pid), "-f", serverScript])
        .toString()
        .trim(),
    );
    process.kill(pid, "SIGKILL");
    await until("presence to say not ready", async () => ((await onlineExecutors(nats.url)).includes(EXECUTOR) ? undefined : true));
    expect(logs.some((l) => l.msg === "MCP server restart failed")).toBe(true);
    expect((await gw.api("GET", `/v1/assignments/${assignmentId}`)).state).toBe("running");

    symlinkSync(referenceServer("@modelcontextprotocol/server-everything"), serverScript);
    await until("presence online again", async () => ((await onlineExecutors(nats.url)).includes(EXECUTOR) ? true : undefined));
    const sent = logs.filter((l) => l.msg === "tools/call sent" && l.assignment_id === assignmentId).map((l) => l.attempt);
    expect(sent).toEqual([0, 1]);
  });
});
