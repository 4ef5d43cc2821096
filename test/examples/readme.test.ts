import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { until } from "../helpers/until.js";

/**
 * examples/README.md's commands, run as written by bash from the repository root: `npx toolgate serve`
 * (the built dist/: after editing src/, `npm run build` first; with its embedded nats-server), curl, and examples/tasks-executor.ts. Only where
 * things live is changed, so the test meets nothing of a developer's own: the HTTP port (a free one
 * instead of 8080, told to the executor in TOOLGATE_URL) and the data dir (a temporary one instead of .toolgate/, also
 * for the executor's store and where it finds the admin key).
 */
const README = readFileSync("examples/README.md", "utf8");
const block = /```sh\n([\s\S]*?)```/.exec(README)?.[1];

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const { port } = server.address() as { port: number };
  await new Promise((done) => server.close(done));
  return port;
}

/** This process's environment without NATS connection settings: the commands must run on the embedded nats-server (NATS_SERVER_BIN stays). */
function ownEnvironment(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("NATS_") || name === "NATS_SERVER_BIN"));
}

/** Whether any process of the group is still there. */
function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

describe("examples/README.md, run as written", () => {
  let dataDir: string;
  let port: number;
  let shell: ChildProcess;
  let output = "";
  const vars: Record<string, string> = {};

  /** Runs the README's block once, on a free port and a fresh data dir; the shell's exit code. */
  const runBlock = async (commands: string): Promise<number | null> => {
    dataDir = mkdtempSync(join(tmpdir(), "toolgate-readme-"));
    port = await freePort();
    output = "";
    const script = [
      "set -euo pipefail",
      // One JSON answer a line, so the output reads as the steps' answers in order.
      "curl() { command curl -w '\\n' \"$@\"; }",
      commands.replaceAll("127.0.0.1:8080", `127.0.0.1:${port}`).replaceAll(".toolgate/", `${dataDir}/`),
      'echo "::RUN=$RUN"',
      'echo "::KEY=$KEY"',
    ].join("\n");
    // Its own process group: the gateway, its nats-server and the executor are stopped together after.
    shell = spawn("bash", ["-c", script], {
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
      env: {
        ...ownEnvironment(),
        TOOLGATE_DATA_DIR: dataDir,
        TOOLGATE_HTTP_PORT: String(port),
        TOOLGATE_URL: `http://127.0.0.1:${port}`,
        TOOLGATE_EMBEDDED_NATS_PORT: "0",
        RUNNER_STORE: join(dataDir, "tasks-executor.db"),
        LOG_LEVEL: "warn",
      },
    });
    shell.stdout!.setEncoding("utf8").on("data", (c: string) => (output += c));
    shell.stderr!.setEncoding("utf8").on("data", (c: string) => (output += c));
    return new Promise<number | null>((done) => shell.once("exit", done));
  };

  beforeAll(async () => {
    if (!block) throw new Error("examples/README.md has no ```sh block");
    if (!existsSync("dist/cli/main.js")) throw new Error("`npx toolgate` runs the built dist/: run 'npm run build' (npm install does it)");
    let code = await runBlock(block);
    // The free port can be taken by another suite's process before the gateway listens on it: once more on another.
    for (let attempt = 1; attempt < 3 && code !== 0 && output.includes(`127.0.0.1:${port} is taken`); attempt++) {
      await stopGroup();
      rmSync(dataDir, { recursive: true, force: true });
      code = await runBlock(block);
    }
    for (const [, name, value] of output.matchAll(/^::(\w+)=(.*)$/gm)) vars[name!] = value!;
    if (code !== 0) throw new Error(`the README's commands exited ${code}:\n${output}`);
  }, 240_000);

  /** Stops what the block started: the gateway, its nats-server and the executor. */
  const stopGroup = async (): Promise<void> => {
    if (shell?.pid === undefined || !groupAlive(shell.pid)) return;
    process.kill(-shell.pid, "SIGTERM");
    await until("the gateway, its nats-server and the executor to stop", () => (groupAlive(shell.pid!) ? undefined : true), 30_000).catch((err: Error) => {
      process.kill(-shell.pid!, "SIGKILL");
      throw err;
    });
  };

  afterAll(async () => {
    await stopGroup();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const api = async (path: string) => {
    const res = await fetch(`http://127.0.0.1:${port}/v1${path}`, { headers: { authorization: `Bearer ${vars.KEY}` } });
    return (await res.json()) as any;
  };

  it("every step answers without an error, and the run exists", async () => {
    expect(output).not.toContain('"error"');
    expect(vars.RUN, output).toMatch(/^[A-Za-z0-9_-]+$/);
    expect((await api(`/runs/${vars.RUN}`)).run_id).toBe(vars.RUN);
  });

  it("the example executor completes both tool calls; the write's result is what the model sees of it", async () => {
    type Call = { tool_name: string; state: string; context_preview: { result: Record<string, unknown> } | null };
    const calls = await until(
      "both tool calls completed",
      async () => {
        const { tool_calls } = (await api(`/runs/${vars.RUN}/history`)) as { tool_calls: Call[] };
        return tool_calls.length === 2 && tool_calls.every((c) => c.state === "completed") ? tool_calls : undefined;
      },
      30_000,
    );
    expect(calls.map((c) => c.tool_name).sort()).toEqual(["tasks.create", "tasks.read"]);
    const created = calls.find((c) => c.tool_name === "tasks.create")!;
    expect(created.context_preview?.result).toMatchObject({ task_id: expect.stringMatching(/^task-/), title: "write the report" });
    expect(calls.find((c) => c.tool_name === "tasks.read")!.context_preview?.result).toHaveProperty("tasks");
  });

  it("the dry-run shows what the model would see of the sample, uncut", () => {
    const dryRun = output
      .split("\n")
      .filter((l) => l.includes('"execution_verified"'))
      .map((l) => JSON.parse(l) as { context_preview: { truncated: boolean; result: unknown }; execution_verified: boolean });
    expect(dryRun).toHaveLength(1);
    expect(dryRun[0]).toMatchObject({ execution_verified: false, context_preview: { truncated: false, result: { next_cursor: "20", tasks: [] } } });
  });
});
