import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import type { ExecutionOptions } from "../../src/execution/execution.js";
import { until } from "./until.js";

const GATEWAY_CHILD = fileURLToPath(new URL("./gateway-child.ts", import.meta.url));
const EXECUTOR_FIXTURE = fileURLToPath(new URL("../fixtures/crash-executor.ts", import.meta.url));

/** Resolves when the process has exited (at once if it already has), with its signal or exit code. */
export function exited(child: ChildProcess): Promise<NodeJS.Signals | number | null> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve(child.signalCode ?? child.exitCode);
    child.once("exit", (code, signal) => resolve(signal ?? code));
  });
}

/** Resident set size of a live process in bytes (Linux), from /proc. */
export function rssBytes(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, "utf8").match(/^VmRSS:\s+(\d+) kB/m);
  if (!line) throw new Error(`no VmRSS for process ${pid}`);
  return Number(line[1]) * 1024;
}

export interface GatewayProcess {
  readonly proc: ChildProcess;
  readonly url: string;
  /** SIGTERM and wait. */
  stop(): Promise<void>;
  /** SIGKILL and wait. */
  kill(): Promise<void>;
}

/** The whole gateway (config plane, execution path, HTTP) in a child process; `env` holds gateway settings (TOOLGATE_STREAM_REPLICAS...). */
export function startGatewayProcess(natsUrl: string, execution: Partial<ExecutionOptions> = {}, env: Record<string, string> = {}): Promise<GatewayProcess> {
  const proc = spawn(process.execPath, ["--import", "tsx", GATEWAY_CHILD], {
    env: { ...process.env, NATS_URL: natsUrl, TOOLGATE_TEST_EXECUTION: JSON.stringify(execution), TOOLGATE_TEST_ENV: JSON.stringify(env) },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const signal = async (s: NodeJS.Signals) => {
    const done = exited(proc);
    proc.kill(s);
    await done;
  };
  return new Promise((resolve, reject) => {
    proc.once("exit", (code) => reject(new Error(`gateway process exited with ${code}`)));
    createInterface({ input: proc.stdout! }).once("line", (line) => {
      proc.removeAllListeners("exit");
      resolve({ proc, url: (JSON.parse(line) as { url: string }).url, stop: () => signal("SIGTERM"), kill: () => signal("SIGKILL") });
    });
  });
}

export interface ExecutorSpec {
  executorId: string;
  scope: string;
  binding: string;
  readBinding?: string;
  /** Extra environment: TOOLGATE_CRASH_RATE, TOOLGATE_STALL_POINT, HANDLER_WORK_MS, MAX_CONCURRENT... */
  env?: Record<string, string>;
}

/** One supervised executor process: restarted with the same id and store whenever it dies unasked. */
export interface SupervisedExecutor {
  readonly spec: ExecutorSpec;
  readonly store: string;
  readonly ledger: string;
  /** The process running now. */
  readonly proc: ChildProcess;
  /** Lines the current process printed on stdout (`ready`, `stalled <assignment>`). */
  readonly lines: string[];
}

/**
 * Runs crash-executor fixtures under a supervisor: a process that dies without being asked to (it
 * SIGKILLed itself at a crash point) is started again with the same executor id and store, as a
 * process manager would. Kills are counted per crash point from the fixture's stderr.
 */
export class ExecutorPool {
  readonly executors: SupervisedExecutor[] = [];
  readonly kills = new Map<string, number>();
  restarts = 0;
  private readonly stopped = new Set<SupervisedExecutor>();

  constructor(
    private readonly natsUrl: () => string,
    private readonly dir: string,
  ) {}

  start(spec: ExecutorSpec): SupervisedExecutor {
    const entry = {
      spec,
      store: join(this.dir, `${spec.executorId}.db`),
      ledger: join(this.dir, `${spec.executorId}-effects.db`),
      proc: undefined as unknown as ChildProcess,
      lines: [] as string[],
    };
    this.executors.push(entry);
    this.launch(entry);
    return entry;
  }

  get totalKills(): number {
    return [...this.kills.values()].reduce((a, b) => a + b, 0);
  }

  /**
   * SIGTERM executors (all by default; a clean close: the runner flushes its outbox) and wait; the
   * supervisor lets them go. A process the supervisor just restarted is first let reach `ready`: one
   * signalled while still loading has no handler yet and dies without replaying its outbox, which
   * the checker would rightly call a lost receipt.
   */
  async stop(which: readonly SupervisedExecutor[] = this.executors): Promise<void> {
    await Promise.all(which.map((e) => this.stopOne(e as SupervisedExecutor & { proc: ChildProcess; lines: string[] })));
  }

  private async stopOne(e: SupervisedExecutor & { proc: ChildProcess; lines: string[] }): Promise<void> {
    for (;;) {
      e.proc.kill("SIGCONT");
      await until(`${e.spec.executorId} ready before its clean stop`, () => (e.lines.includes("ready") ? true : undefined), 60_000);
      this.stopped.add(e);
      const proc = e.proc;
      const done = exited(proc);
      proc.kill("SIGCONT");
      proc.kill("SIGTERM");
      await done;
      if (proc.signalCode !== "SIGKILL") return;
      // It killed itself at a crash point just before the signal: bring it back, so its outbox is replayed.
      this.stopped.delete(e);
      this.restarts++;
      this.launch(e);
    }
  }

  private launch(entry: SupervisedExecutor & { proc: ChildProcess; lines: string[] }): void {
    const { spec } = entry;
    const proc = spawn(process.execPath, ["--import", "tsx", EXECUTOR_FIXTURE], {
      env: {
        ...process.env,
        LOG_LEVEL: "error",
        NATS_URL: this.natsUrl(),
        RUNNER_STORE: entry.store,
        EFFECTS_DB: entry.ledger,
        EXECUTOR_ID: spec.executorId,
        SCOPE: spec.scope,
        BINDING: spec.binding,
        ...(spec.readBinding ? { READ_BINDING: spec.readBinding } : {}),
        ...spec.env,
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    entry.proc = proc;
    entry.lines = [];
    createInterface({ input: proc.stdout! }).on("line", (line) => entry.lines.push(line));
    createInterface({ input: proc.stderr! }).on("line", (line) => {
      const killed = /SIGKILL at (\w+)/.exec(line);
      if (killed) this.kills.set(killed[1]!, (this.kills.get(killed[1]!) ?? 0) + 1);
    });
    proc.once("exit", () => {
      if (this.stopped.has(entry)) return;
      this.restarts++;
      this.launch(entry);
    });
  }
}
