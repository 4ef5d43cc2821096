import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestNats, type TestNats } from "../helpers/nats.js";
import { exited } from "../helpers/processes.js";
import { ADMIN_KEY, startExecutionGateway, SHORT_LEASES, type TestGateway } from "../helpers/execution-gateway.js";
import { until } from "../helpers/until.js";

/**
 * The example executor of examples/ is one command: it registers itself in the executor registry
 * with the admin key (there is no open mode), and registering again at its next start is fine.
 */
describe("examples/tasks-executor.ts", () => {
  let nats: TestNats;
  let gw: TestGateway;
  let dir: string;
  let sessionId: string;

  beforeAll(async () => {
    nats = await startTestNats();
    gw = await startExecutionGateway(nats.url, SHORT_LEASES);
    dir = mkdtempSync(join(tmpdir(), "toolgate-example-"));
    await gw.api("POST", "/v1/bindings", { binding_id: "tasks-read", executor_scope: "tasks-product", tool_kind: "read" });
    await gw.api("POST", "/v1/bindings", { binding_id: "tasks-write", executor_scope: "tasks-product", tool_kind: "write" });
    await gw.api("POST", "/v1/toolsets/tasks/versions", {
      version: "v1",
      tools: [
        { name: "tasks.create", description: "Create a task", binding_id: "tasks-write", input_schema: { type: "object" }, output_schema: { type: "object" } },
      ],
    });
    const agentVersion = await gw.api("POST", "/v1/agents/tasks-agent/versions", { toolset: "tasks", toolset_version: "v1", max_context_tokens: 100_000 });
    sessionId = (await gw.api("POST", "/v1/sessions", { agent_version: agentVersion.agent_version, subject: "user-42" })).session_id;
  });
  afterAll(async () => {
    await gw?.close();
    await nats?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** Starts the example as its README says, with the admin key in the environment; resolves once it is online. */
  const start = (): Promise<ChildProcess> => {
    const child = spawn(process.execPath, ["--import", "tsx", "examples/tasks-executor.ts"], {
      env: {
        PATH: process.env.PATH ?? "",
        NATS_URL: nats.url,
        RUNNER_STORE: join(dir, "tasks-executor.db"),
        TOOLGATE_ADMIN_KEY: ADMIN_KEY,
        TOOLGATE_URL: gw.baseUrl,
      },
      stdio: ["ignore", "pipe", "inherit"],
    });
    return new Promise((resolve, reject) => {
      child.once("exit", (code) => reject(new Error(`the example exited with ${code}`)));
      createInterface({ input: child.stdout! }).on("line", (line) => {
        if (!line.includes("online")) return;
        child.removeAllListeners("exit");
        resolve(child);
      });
    });
  };

  it("registers itself, serves its tools, and registers again on its next start", async () => {
    let child = await start();
    expect(await gw.api("GET", "/v1/executors/tasks-executor-1")).toMatchObject({ scope: "tasks-product", bindings: ["tasks-read", "tasks-write"], nkeys: [] });
    const run = await gw.api("POST", `/v1/sessions/${sessionId}/runs`);
    const call = async () =>
      (await gw.api("POST", `/v1/runs/${run.run_id}/tool-calls`, { tool_name: "tasks.create", arguments: { title: "write the report" } })).assignment
        .assignment_id as string;
    const completed = (id: string) =>
      until(`${id} completed`, async () => ((await gw.api("GET", `/v1/assignments/${id}`)).state === "completed" ? true : undefined));
    await completed(await call());

    child.kill("SIGTERM");
    await exited(child);
    child = await start();
    await completed(await call());
    child.kill("SIGTERM");
    await exited(child);
  });
});
