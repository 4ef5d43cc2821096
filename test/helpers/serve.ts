import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";

/** What a CLI child inherits: PATH, and the suite's choice of nats-server for an embedded one. */
const inherited = (): Record<string, string> => ({
  PATH: process.env.PATH ?? "",
  ...(process.env.TOOLGATE_NATS_SERVER ? { TOOLGATE_NATS_SERVER: process.env.TOOLGATE_NATS_SERVER } : {}),
});

/** Runs `toolgate <args>` from source; resolves with its exit code and output. */
export function runCli(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ["--import", "tsx", "src/cli/run.ts", ...args], {
    env: { ...inherited(), TOOLGATE_EMBEDDED_NATS_PORT: "0", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (c: string) => (stdout += c));
  child.stderr.setEncoding("utf8").on("data", (c: string) => (stderr += c));
  return new Promise((resolve) => child.once("close", (code) => resolve({ code, stdout, stderr })));
}

/** Runs `toolgate <args>` with its stdout read by a reader that leaves after `keep` bytes, as `| head -c keep` does. */
export function runCliInPipe(args: string[], keep: number): Promise<{ code: number | null; head: string; stderr: string }> {
  const child = spawn(process.execPath, ["--import", "tsx", "src/cli/run.ts", ...args], {
    env: { PATH: process.env.PATH ?? "" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let head = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (c: string) => {
    head = (head + c).slice(0, keep);
    if (head.length >= keep) child.stdout.destroy();
  });
  child.stderr.setEncoding("utf8").on("data", (c: string) => (stderr += c));
  return new Promise((resolve) => child.once("exit", (code) => resolve({ code, head, stderr })));
}

export interface ServeProcess {
  child: ChildProcess;
  url: string;
  /** The separate metrics listener's URL, when TOOLGATE_METRICS_PORT was set. */
  metricsUrl: string;
  /** Every log line so far (JSON), in order. */
  logs: string[];
  exited: Promise<number | null>;
}

/** Spawns `toolgate serve`; resolves once it logs "gateway listening". */
export function serve(env: Record<string, string>): Promise<ServeProcess> {
  const child = spawn(process.execPath, ["--import", "tsx", "src/cli/run.ts", "serve"], {
    // Port 0 for both the API and an embedded nats-server: suites run side by side.
    env: { ...inherited(), TOOLGATE_HTTP_PORT: "0", TOOLGATE_EMBEDDED_NATS_PORT: "0", ...env },
    stdio: ["ignore", "ignore", "pipe"],
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const logs: string[] = [];
  return new Promise((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`serve exited (${code}) before listening:\n${logs.join("\n")}`)));
    createInterface({ input: child.stderr! }).on("line", (line) => {
      logs.push(line);
      const entry = JSON.parse(line) as { msg?: string; url?: string; metrics?: string };
      if (entry.msg === "gateway listening" && entry.url) resolve({ child, url: entry.url, metricsUrl: entry.metrics ?? "", logs, exited });
    });
  });
}
