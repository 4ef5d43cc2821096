import { spawn, type ChildProcess } from "node:child_process";
import { EventEmitter } from "node:events";
import { closeSync, openSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { createInterface } from "node:readline";

/** A Node.js entry point run in its own process, its stderr kept in a log file, its stdout read as lines. */
export interface BenchChild {
  readonly name: string;
  readonly child: ChildProcess;
  /** SIGTERM and wait for the exit (a `--cpu-prof` profile is written then). */
  stop(): Promise<void>;
  /** The last lines of its log, for an error message. */
  logTail(): string;
  /** Its stdout, a `line` event per line. */
  readonly lines: EventEmitter;
  /** Sends one JSON line on its stdin and resolves with the JSON of the next `result ` line it prints. */
  request<T>(command: unknown, timeoutMs?: number): Promise<T>;
}

export interface SpawnOptions {
  /** Run the entry under tsx (TypeScript source); false for compiled JavaScript (`dist/`). Default true. */
  tsx?: boolean;
  /** Working directory (a baseline tree's root); default this process's. */
  cwd?: string;
}

/** How long a child may take to stop after SIGTERM (a profiled one writes its profile then) before it is killed. */
const STOP_GRACE_MS = 15_000;

/**
 * Spawns `node [--import tsx] <entry> ...args`. With `BENCH_PROFILE=<dir>` in the environment the child
 * runs under `--cpu-prof`, writing into `<dir>/<name>/` when it exits: one profile per thread, the
 * main thread's is the `CPU.*.<pid>.0.*.cpuprofile` (the others are tsx's loader thread).
 */
export function spawnBenchChild(
  name: string,
  entry: string,
  args: string[],
  env: Record<string, string>,
  logFile: string,
  options: SpawnOptions = {},
): BenchChild {
  const profileDir = process.env.BENCH_PROFILE;
  const profile = profileDir ? ["--cpu-prof", `--cpu-prof-dir=${join(profileDir, name)}`] : [];
  const loader = options.tsx === false ? [] : ["--import", "tsx"];
  const log = openSync(logFile, "a");
  const child = spawn(process.execPath, [...profile, ...loader, entry, ...args], {
    cwd: options.cwd,
    env: { ...process.env, ...env },
    stdio: ["pipe", "pipe", log],
  });
  closeSync(log);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const lines = new EventEmitter();
  createInterface({ input: child.stdout! }).on("line", (l) => lines.emit("line", l));
  const logTail = () => readFileSync(logFile, "utf8").split("\n").slice(-20).join("\n");
  return {
    name,
    child,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill("SIGTERM");
      // A child whose drain waits on a peer that died (an answer that never comes) would hang the whole bench.
      const kill = setTimeout(() => {
        process.stderr.write(`bench: ${name} still running ${STOP_GRACE_MS} ms after SIGTERM: killed (its log: ${logFile})\n`);
        child.kill("SIGKILL");
      }, STOP_GRACE_MS);
      await exited;
      clearTimeout(kill);
    },
    logTail,
    request<T>(command: unknown, timeoutMs = 120_000): Promise<T> {
      return new Promise((resolve, reject) => {
        const done = (err: Error | undefined, value?: T) => {
          clearTimeout(timer);
          lines.off("line", onLine);
          child.off("exit", onExit);
          if (err) reject(err);
          else resolve(value as T);
        };
        const timer = setTimeout(() => done(new Error(`${name}: no result within ${timeoutMs} ms:\n${logTail()}`)), timeoutMs);
        const onExit = () => done(new Error(`${name} exited:\n${logTail()}`));
        const onLine = (l: string) => {
          if (!l.startsWith("result ")) return;
          const answer = JSON.parse(l.slice("result ".length)) as { error?: string };
          done(answer.error ? new Error(`${name}: ${answer.error}`) : undefined, answer as T);
        };
        lines.on("line", onLine);
        child.once("exit", onExit);
        child.stdin!.write(`${JSON.stringify(command)}\n`);
      });
    },
    lines,
  };
}

/** Resolves when the child prints `line` on stdout; rejects if it exits first. */
export function waitForLine(c: BenchChild, line: string, timeoutMs = 60_000): Promise<void> {
  return new Promise((resolve, reject) => {
    const done = (err?: Error) => {
      clearTimeout(timer);
      c.lines.off("line", onLine);
      c.child.off("exit", onExit);
      if (err) reject(err);
      else resolve();
    };
    const timer = setTimeout(() => done(new Error(`${c.name}: no '${line}' within ${timeoutMs} ms:\n${c.logTail()}`)), timeoutMs);
    const onExit = () => done(new Error(`${c.name} exited before '${line}':\n${c.logTail()}`));
    const onLine = (l: string) => l === line && done();
    c.lines.on("line", onLine);
    c.child.once("exit", onExit);
  });
}

/** `getconf CLK_TCK` on every Linux the bench runs on. */
const CLOCK_TICKS_PER_SEC = 100;

/** CPU time (user + system) process `pid` has used so far, in ms (Linux `/proc/<pid>/stat`, readable for any process). */
export function processCpuMs(pid: number): number {
  // Fields after the parenthesised command name; utime and stime are the 14th and 15th of the line.
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SEC) * 1000;
}

/**
 * Read-type plus write-type system calls of process `pid` so far (`syscr` + `syscw` of `/proc/<pid>/io`):
 * socket and file I/O alike; each NATS flush, HTTP answer or log line is one. NaN for a process of
 * another user (its `io` is not readable), such as the machine's redis-server.
 */
export function processSyscalls(pid: number): number {
  let io: string;
  try {
    io = readFileSync(`/proc/${pid}/io`, "utf8");
  } catch {
    return Number.NaN;
  }
  const field = (name: string) => Number(new RegExp(`^${name}: (\\d+)$`, "m").exec(io)?.[1] ?? Number.NaN);
  return field("syscr") + field("syscw");
}

/** A TCP port free right now on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => (typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port"))));
    });
  });
}
