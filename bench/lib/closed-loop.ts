/**
 * The load of every system the benches compare: a closed loop of N callers, each making one call after
 * the other until the level's time is up, or the same callers paced to one rate of call starts. It
 * runs inside each system's producer process; the bench driver sends it one command line per level
 * on stdin and reads one `result {...}` line back.
 */
import { createInterface } from "node:readline";
import { setTimeout } from "node:timers/promises";
import { percentile } from "./stats.js";
import { readyUntilStopped } from "./workload.js";

/**
 * One level: how many calls in flight, for how long; `rate`, when set, paces the callers to that many
 * call starts a second between them (a caller waits for its turn in the schedule), so systems that
 * keep up are compared at the same load: their CPU per call then tells their costs apart, not how
 * much each one's batching gains at its own closed-loop rate.
 */
export interface LevelCommand {
  concurrency: number;
  seconds: number;
  rate?: number;
}

/** What a level did: calls completed, the wall time until the last one completed, latency percentiles (ms). */
export interface LevelOutcome {
  calls: number;
  elapsedMs: number;
  p50: number;
  p95: number;
  p99: number;
  mean: number;
}

/**
 * `concurrency` callers (0, 1, ...) each await `call(caller)` in turn; no caller starts a call after
 * `seconds`. With a `rate`, the n-th call starts no sooner than n ÷ rate seconds into the level; a
 * system that falls behind the schedule runs as a closed loop until it catches up (the calls whose
 * turns have passed start at once). A latency is timed from the call's start, not from its turn.
 */
export async function closedLoop(command: LevelCommand, call: (caller: number) => Promise<void>): Promise<LevelOutcome> {
  const latencies: number[] = [];
  const started = performance.now();
  const deadline = started + command.seconds * 1000;
  const interval = command.rate ? 1000 / command.rate : 0;
  let scheduled = 0;
  const caller = async (_: unknown, index: number) => {
    while (performance.now() < deadline) {
      if (interval > 0) {
        const turn = started + scheduled++ * interval;
        if (turn >= deadline) return;
        // A timer may fire a millisecond or more early (whole milliseconds, the loop's cached clock): wait again then.
        for (let wait = turn - performance.now(); wait > 0; wait = turn - performance.now()) await setTimeout(Math.ceil(wait));
        if (performance.now() >= deadline) return; // a timer that fired late, past the level's end
      }
      const start = performance.now();
      await call(index);
      latencies.push(performance.now() - start);
    }
  };
  await Promise.all(Array.from({ length: command.concurrency }, caller));
  const elapsedMs = performance.now() - started;
  latencies.sort((a, b) => a - b);
  return {
    calls: latencies.length,
    elapsedMs,
    p50: percentile(latencies, 50),
    p95: percentile(latencies, 95),
    p99: percentile(latencies, 99),
    mean: latencies.reduce((a, b) => a + b, 0) / latencies.length,
  };
}

/**
 * The producer's side of the channel: prints `ready`, then answers each command line on stdin with
 * `result <LevelOutcome>` (or `result {"error": ...}`), one level at a time. A command with
 * `prepare: true` only runs `prepare` (work a level needs that is no part of its calls, done before the
 * driver takes its counters) and answers `result {}`. SIGTERM runs `close`.
 */
export function serveLevels(
  runLevel: (command: LevelCommand) => Promise<LevelOutcome>,
  close: () => Promise<void>,
  prepare?: (command: LevelCommand) => Promise<void>,
): void {
  let queue = Promise.resolve();
  createInterface({ input: process.stdin }).on("line", (line) => {
    queue = queue.then(async () => {
      try {
        const command = JSON.parse(line) as LevelCommand & { prepare?: boolean };
        const answer = command.prepare ? await prepare?.(command) : await runLevel(command);
        process.stdout.write(`result ${JSON.stringify(answer ?? {})}\n`);
      } catch (err) {
        process.stdout.write(`result ${JSON.stringify({ error: err instanceof Error ? err.message : String(err) })}\n`);
      }
    });
  });
  readyUntilStopped(close);
}
