import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestNats, type TestNats } from "../helpers/nats.js";
import { exited } from "../helpers/processes.js";
import { publishTasksAgent } from "../runner/helpers/tasks-agent.js";
import { ADMIN_KEY, startExecutionGateway, SHORT_LEASES, type TestGateway } from "../helpers/execution-gateway.js";

const run = promisify(execFile);

/**
 * examples/agent-loop/ end to end: a real gateway and nats-server, the tasks executor of examples/
 * (a real ToolRunner) serving the tools, and the agent loop run as its header says.
 */
describe("examples/agent-loop", () => {
  let nats: TestNats;
  let gw: TestGateway;
  let dir: string;
  let executor: ChildProcess;
  let sessionId: string;

  beforeAll(async () => {
    nats = await startTestNats();
    gw = await startExecutionGateway(nats.url, SHORT_LEASES);
    dir = mkdtempSync(join(tmpdir(), "toolgate-agent-loop-"));
    ({ sessionId } = await publishTasksAgent(gw, { scope: "tasks-product", readBinding: "tasks-read", writeBinding: "tasks-write", agent: "tasks-agent" }));
    executor = spawn(process.execPath, ["--import", "tsx", "examples/tasks-executor.ts"], {
      env: {
        PATH: process.env.PATH ?? "",
        NATS_URL: nats.url,
        RUNNER_STORE: join(dir, "tasks-executor.db"),
        TOOLGATE_ADMIN_KEY: ADMIN_KEY,
        TOOLGATE_URL: gw.baseUrl,
      },
      stdio: ["ignore", "pipe", "inherit"],
    });
    await new Promise<void>((resolve, reject) => {
      executor.once("exit", (code) => reject(new Error(`the tasks executor exited with ${code}`)));
      createInterface({ input: executor.stdout! }).on("line", (line) => line.includes("online") && resolve());
    });
  }, 120_000);
  afterAll(async () => {
    if (executor && executor.exitCode === null) {
      executor.removeAllListeners("exit");
      executor.kill("SIGTERM");
      await exited(executor);
    }
    await gw?.close();
    await nats?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** Runs the loop for a session; resolves to its steps (one JSON line each). */
  async function agentLoop(session: string, env: Record<string, string> = {}): Promise<{ step: string; [fact: string]: unknown }[]> {
    const { stdout } = await run(process.execPath, ["--import", "tsx", "examples/agent-loop/agent-loop.ts"], {
      env: { PATH: process.env.PATH ?? "", TOOLGATE_URL: gw.baseUrl, TOOLGATE_KEY: ADMIN_KEY, TOOLGATE_SESSION: session, ...env },
    });
    return stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line));
  }

  it("offers the tools, calls them through toolgate, appends the projections, reports usage and completes the run", async () => {
    const steps = await agentLoop(sessionId);
    expect(steps.map((s) => s.step)).toEqual(["tools", "run", "model", "tool", "model", "tool", "model", "answer"]);
    expect(steps[0]!.offered).toEqual(["tasks__read", "tasks__create"]);
    expect(steps.filter((s) => s.step === "tool").map((s) => [s.name, s.state])).toEqual([
      ["tasks.create", "completed"],
      ["tasks.read", "completed"],
    ]);
    expect(steps.at(-1)!.content).toContain("write the report"); // the model answered from the tasks.read projection
    expect(steps.filter((s) => s.step === "model").every((s) => s.must_compact === false)).toBe(true);

    const runId = steps[1]!.run_id as string;
    const history = await gw.api("GET", `/v1/runs/${runId}/history`);
    expect(history.state).toBe("completed");
    expect(history.tool_calls.map((t: { tool_call_id: string; state: string }) => [t.tool_call_id, t.state])).toEqual([
      ["call_1", "completed"],
      ["call_2", "completed"],
    ]);
    expect((await gw.api("GET", `/v1/runs/${runId}/context`)).calibrated_from).toBeGreaterThanOrEqual(3);
  }, 120_000);

  it("compacts the oldest tool results when the context window says must_compact", async () => {
    const small = await gw.api("POST", "/v1/agents/tasks-agent/versions", { toolset: "tasks-agent-tools", toolset_version: "v1", max_context_tokens: 1 });
    const session = await gw.api("POST", "/v1/sessions", { agent_version: small.agent_version, subject: "user-42" });
    const steps = await agentLoop(session.session_id);
    expect(steps.filter((s) => s.step === "model").map((s) => s.must_compact)).toEqual([true, true, true]);
    expect(steps.filter((s) => s.step === "compacted").map((s) => s.tool_results)).toEqual([0, 1]);
    expect(steps.at(-1)!.step).toBe("answer");
  }, 120_000);

  it("cancels its run when it runs out of model calls", async () => {
    const steps = await agentLoop(sessionId, { AGENT_MAX_TURNS: "1" });
    expect(steps.map((s) => s.step)).toEqual(["tools", "run", "model", "tool", "cancelled"]);
    expect((await gw.api("GET", `/v1/runs/${steps[1]!.run_id as string}`)).state).toBe("cancelled");
  }, 120_000);
  it("an async tool: the call is answered with its submission, the loop goes on and hands the report to the model when the event stream announces it", async () => {
    await gw.api("POST", "/v1/toolsets/tasks-agent-tools/versions", {
      version: "v2-reports",
      tools: [
        {
          name: "tasks.read",
          description: "Read tasks, a page at a time",
          binding_id: "tasks-read",
          input_schema: { type: "object", properties: { cursor: { type: "string" } } },
          output_schema: { type: "object" },
          max_result_context_bytes: 1024,
        },
        {
          name: "tasks.create",
          description: "Create a task",
          binding_id: "tasks-write",
          input_schema: { type: "object", properties: { title: { type: "string" } }, required: ["title"] },
          output_schema: { type: "object" },
        },
        {
          name: "reports.generate",
          description: "Generate a report in the background",
          binding_id: "tasks-write",
          input_schema: { type: "object", properties: { topic: { type: "string" } }, required: ["topic"] },
          output_schema: { type: "object" },
          task_deadline_ms: 60_000,
        },
      ],
    });
    const agent = await gw.api("POST", "/v1/agents/tasks-agent/versions", {
      toolset: "tasks-agent-tools",
      toolset_version: "v2-reports",
      max_context_tokens: 100_000,
    });
    const session = await gw.api("POST", "/v1/sessions", { agent_version: agent.agent_version, subject: "user-7" });
    const steps = await agentLoop(session.session_id);

    expect(steps.filter((s) => s.step === "tool").map((s) => [s.name, s.state])).toEqual([
      ["tasks.create", "completed"],
      ["tasks.read", "completed"],
      ["reports.generate", "submitted"],
    ]);
    const names = steps.map((s) => s.step);
    expect(steps.filter((s) => s.step === "task_result").map((s) => [s.name, s.state])).toEqual([["reports.generate", "completed"]]);
    expect(names.indexOf("task_result")).toBeGreaterThan(names.lastIndexOf("tool"));
    expect(names.at(-1)).toBe("answer");
    expect(steps.at(-1)!.content).toContain("The report is ready");
    expect(steps.at(-1)!.content).toContain("write the report"); // the report listed the task made earlier in the run

    const history = await gw.api("GET", `/v1/runs/${steps[1]!.run_id as string}/history`);
    expect(history.state).toBe("completed");
    expect(history.tool_calls.map((t: { tool_call_id: string; state: string }) => [t.tool_call_id, t.state])).toEqual([
      ["call_1", "completed"],
      ["call_2", "completed"],
      ["call_3", "completed"],
    ]);
    expect(history.tool_calls[2].context_preview.result).toMatchObject({ task_ref: history.tool_calls[2].task.task_ref });
    expect(history.task_results).toMatchObject([
      { tool_call_id: "call_3", state: "completed", after_tool_calls: 3, context_preview: { result: { open_tasks: 1 } } },
    ]);
  }, 120_000);
});
