import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestNats, type TestNats } from "../helpers/nats.js";
import { exited } from "../helpers/processes.js";
import { until } from "../helpers/until.js";
import { startExecutionGateway, SHORT_LEASES, type TestGateway } from "../helpers/execution-gateway.js";
import { publishMcpServer, referenceServer, registerExecutor, settled, toolCall } from "./helpers.js";

const SCOPE = "memory";
const EXECUTOR = "mcp-memory-1";

/** `toolgate mcp-executor` in its own process, its JSON log lines collected. */
interface ExecutorProcess {
  child: ChildProcess;
  logs: Array<{ msg: string; [k: string]: unknown }>;
}

describe("MCP executor CLI with @modelcontextprotocol/server-memory: a write tool and its crash rules", () => {
  let nats: TestNats;
  let gw: TestGateway;
  let dir: string;
  let memoryFile: string;
  let sessionId: string;
  let executor: ExecutorProcess;
  const serverPids: number[] = [];
  const children: ChildProcess[] = [];
  const server = () => ["--env", `MEMORY_FILE_PATH=${memoryFile}`, "--", process.execPath, referenceServer("@modelcontextprotocol/server-memory")];
  const mapping = ["--scope", SCOPE, "--binding", "memory-write", "--read-binding", "memory-read"];

  beforeAll(async () => {
    nats = await startTestNats();
    gw = await startExecutionGateway(nats.url, SHORT_LEASES);
    dir = mkdtempSync(join(tmpdir(), "toolgate-mcp-memory-"));
    memoryFile = join(dir, "memory.jsonl");
    ({ sessionId } = await publishMcpServer(gw, { toolset: "memory-tools", agent: "memory-agent", importArgs: [...mapping, ...server()] }));
    await registerExecutor(gw, EXECUTOR, SCOPE, ["memory-read", "memory-write"]);
    executor = await startExecutor();
  });

  afterAll(async () => {
    for (const child of children) child.kill("SIGKILL");
    for (const pid of serverPids) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // gone already
      }
    }
    await gw?.close();
    await nats?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  async function startExecutor(): Promise<ExecutorProcess> {
    const args = [
      "--import",
      "tsx",
      "src/cli/run.ts",
      "mcp-executor",
      ...mapping,
      "--executor-id",
      EXECUTOR,
      "--store",
      join(dir, "executor.db"),
      "--server",
      nats.url,
      ...server(),
    ];
    const child = spawn(process.execPath, args, { env: { PATH: process.env.PATH ?? "", LOG_LEVEL: "debug" }, stdio: ["ignore", "ignore", "pipe"] });
    children.push(child);
    const started: ExecutorProcess = { child, logs: [] };
    createInterface({ input: child.stderr! }).on("line", (line) => {
      const entry = JSON.parse(line) as ExecutorProcess["logs"][number];
      started.logs.push(entry);
      if (entry.msg === "MCP server connected") serverPids.push(entry.server_pid as number);
    });
    await until("the executor to serve", () => (started.logs.some((l) => l.msg === "MCP executor serving") ? true : undefined), 30_000);
    return started;
  }

  const graph = () => (existsSync(memoryFile) ? readFileSync(memoryFile, "utf8") : "");
  const sentFor = (p: ExecutorProcess, assignmentId: string) => p.logs.filter((l) => l.msg === "tools/call sent" && l.assignment_id === assignmentId);

  it("serves server-memory's tools with kinds from their annotations", () => {
    const serving = executor.logs.find((l) => l.msg === "MCP executor serving")!.tools as Array<{ name: string; kind: string; binding: string }>;
    expect(serving).toContainEqual({ name: "create_entities", kind: "write", binding: "memory-write" });
    expect(serving).toContainEqual({ name: "read_graph", kind: "read", binding: "memory-read" });
  });

  it("a write round trip: completed, and the server's memory file holds it", async () => {
    const { runId, assignmentId } = await toolCall(gw, sessionId, "create_entities", {
      entities: [{ name: "alice", entityType: "person", observations: ["likes tea"] }],
    });
    expect((await settled(gw, assignmentId)).state).toBe("completed");
    expect(graph()).toContain('"name":"alice"');
    const preview = (await gw.api("GET", `/v1/runs/${runId}/history`)).tool_calls[0].context_preview;
    expect(JSON.parse(preview.result.structuredContent ? JSON.stringify(preview.result.structuredContent) : preview.result.content[0].text)).toMatchObject({
      entities: [{ name: "alice" }],
    });
  });

  it("executor SIGKILLed after accepted, with tools/call sent: reconciliation_required, and the tool is not called again", async () => {
    const pid = serverPids.at(-1)!;
    process.kill(pid, "SIGSTOP"); // the server holds its answer: the call is out when the executor dies
    const { assignmentId } = await toolCall(gw, sessionId, "add_observations", {
      observations: [{ entityName: "alice", contents: ["wrote the quarterly report"] }],
    });
    await until("tools/call to be sent", () => (sentFor(executor, assignmentId).length > 0 ? true : undefined));
    executor.child.kill("SIGKILL");
    await exited(executor.child);
    process.kill(pid, "SIGCONT"); // it reads the call already in its stdin and writes its file
    await until("the server to apply the call", () => (graph().includes("wrote the quarterly report") ? true : undefined));
    const applied = { inode: statSync(memoryFile).ino, content: graph() };
    expect((await gw.api("GET", `/v1/assignments/${assignmentId}`)).state).toBe("running");

    executor = await startExecutor();
    const a = await settled(gw, assignmentId);
    expect(a.state).toBe("reconciliation_required");
    expect(a.outcome.error.code).toBe("executor_restarted");
    // The server's own state: the file was not written again (every write renames a new file in).
    expect(sentFor(executor, assignmentId)).toEqual([]);
    expect({ inode: statSync(memoryFile).ino, content: graph() }).toEqual(applied);
    // The restarted executor serves new calls as usual.
    const next = await toolCall(gw, sessionId, "read_graph", {});
    expect((await settled(gw, next.assignmentId)).state).toBe("completed");
  });

  it("the server dies during a write: reconciliation_required, restarted with backoff, then serving again", async () => {
    const pid = serverPids.at(-1)!;
    process.kill(pid, "SIGSTOP");
    const { assignmentId } = await toolCall(gw, sessionId, "create_entities", { entities: [{ name: "bob", entityType: "person", observations: [] }] });
    await until("tools/call to be sent", () => (sentFor(executor, assignmentId).length > 0 ? true : undefined));
    process.kill(pid, "SIGKILL");
    const a = await settled(gw, assignmentId);
    expect(a.state).toBe("reconciliation_required");
    expect(a.outcome.error.message).toContain("McpConnectionLost");
    await until("a new server process", () => (serverPids.length > 0 && serverPids.at(-1) !== pid ? true : undefined));
    const next = await toolCall(gw, sessionId, "create_entities", { entities: [{ name: "carol", entityType: "person", observations: [] }] });
    expect((await settled(gw, next.assignmentId)).state).toBe("completed");
    expect(graph()).toContain('"name":"carol"');
    expect(graph()).not.toContain('"name":"bob"');
  });

  it("SIGTERM stops the executor cleanly (exit 0)", async () => {
    executor.child.kill("SIGTERM");
    expect(await exited(executor.child)).toBe(0);
  });
});
