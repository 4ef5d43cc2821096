import { spawn, type ChildProcess } from "node:child_process";
import { closeSync, openSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { createInterface } from "node:readline";

/** A TypeScript entry point run under tsx in its own process, its stderr kept in a log file. */
export interface BenchChild {
  readonly child: ChildProcess;
  /** SIGTERM and wait for the exit (a `--cpu-prof` profile is written then). */
  stop(): Promise<void>;
  /** The last lines of its log, for an error message. */
  logTail(): string;
  /** CPU time (user + system) the process has used so far, in ms (Linux `/proc`). */
  cpuMs(): number;
  /** Read and write system calls the process has made so far (Linux `/proc`). */
  syscalls(): number;
}

/** `getconf CLK_TCK` on every Linux the bench runs on. */
const CLOCK_TICKS_PER_SEC = 100;

/**
 * Spawns `node --import tsx <entry> ...args`. With `BENCH_PROFILE=<dir>` in the environment the child
 * runs under `--cpu-prof`, writing into `<dir>/<name>/` when it exits: one profile per thread, the
 * main thread's is the `CPU.*.<pid>.0.*.cpuprofile` (the others are tsx's loader thread).
 */
export function spawnBenchChild(name: string, entry: string, args: string[], env: Record<string, string>, logFile: string): BenchChild {
  const profileDir = process.env.BENCH_PROFILE;
  const profile = profileDir ? ["--cpu-prof", `--cpu-prof-dir=${join(profileDir, name)}`] : [];
  const log = openSync(logFile, "a");
  const child = spawn(process.execPath, [...profile, "--import", "tsx", entry, ...args], { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", log] });
  closeSync(log);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  return {
    child,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      await exited;
    },
    logTail: () => readFileSync(logFile, "utf8").split("\n").slice(-20).join("\n"),
    cpuMs: () => processCpuMs(child.pid!),
    syscalls: () => processSyscalls(child.pid!),
  };
}

/** CPU time (user + system) process `pid` has used so far, in ms (Linux `/proc`). */
export function processCpuMs(pid: number): number {
  // Fields after the parenthesised command name; utime and stime are the 14th and 15th of the line.
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SEC) * 1000;
}

/**
 * Read-type plus write-type system calls of process `pid` so far (`syscr` + `syscw` of `/proc/<pid>/io`):
 * socket and file I/O alike; each NATS flush, HTTP answer or log line is one.
 */
export function processSyscalls(pid: number): number {
  const io = readFileSync(`/proc/${pid}/io`, "utf8");
  const field = (name: string) => Number(new RegExp(`^${name}: (\\d+)$`, "m").exec(io)?.[1] ?? Number.NaN);
  return field("syscr") + field("syscw");
}

/** Resolves when the child prints `line` on stdout; rejects if it exits first. */
export function waitForLine(c: BenchChild, line: string, timeoutMs = 30_000): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no '${line}' within ${timeoutMs} ms:\n${c.logTail()}`)), timeoutMs);
    const onExit = () => reject(new Error(`exited before '${line}':\n${c.logTail()}`));
    c.child.once("exit", onExit);
    createInterface({ input: c.child.stdout! }).on("line", (l) => {
      if (l !== line) return;
      clearTimeout(timer);
      c.child.off("exit", onExit);
      resolve();
    });
  });
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
