/**
 * Runs systems side by side: each started once in its own processes and warmed up, then level by level
 * every system in turn (1 in flight for all, then 10, ...), so a drift of this shared machine weighs on
 * all of them alike. Per system and level: calls/s, latency, CPU ms per call of each of its processes
 * (`/proc/<pid>/stat`), system calls, persisted writes and messages per call.
 */
import { processCpuMs, processSyscalls } from "./child.js";
import type { LevelCommand } from "./closed-loop.js";
import { median } from "./stats.js";
import { countersBetween, type BenchSystem } from "./systems/system.js";

/** A system not started yet: `start` brings up its processes. */
export interface SystemFactory {
  readonly id: string;
  start(): Promise<BenchSystem>;
}

export interface LevelResult {
  id: string;
  /** Which pass over the levels (`BENCH_ROUNDS`); in a median of rounds, how many it took. */
  round: number;
  name: string;
  concurrency: number;
  calls: number;
  seconds: number;
  callsPerSec: number;
  p50: number;
  p95: number;
  p99: number;
  mean: number;
  /** CPU ms per call of each of the system's processes. */
  cpuMs: Record<string, number>;
  cpuMsTotal: number;
  /** Read+write system calls per call of each process (NaN where `/proc/<pid>/io` is not readable). */
  syscalls: Record<string, number>;
  writesPerCall: number;
  /** Per call, by stream or Redis command. */
  writes: Record<string, number>;
  messageUnit: BenchSystem["messageUnit"];
  messagesPerCall: number;
  /** Per call, by `<role> in|out` or Redis command. */
  messages: Record<string, number>;
  /** CPU ms the other (idle) systems' processes used during this level: background the figures carry. */
  idleOthersCpuMs: number;
  /** The lowest and highest calls/s of the rounds a median was taken over. */
  callsPerSecRange?: [number, number];
  error?: string;
}

export interface CompareOptions {
  factories: SystemFactory[];
  levels: number[];
  seconds: number;
  /** Passes over all the levels; the report shows the median of each figure. */
  rounds: number;
  warmupSeconds: number;
  /** Call starts a second every level is paced to (`LevelCommand.rate`); unset, a closed loop. */
  rate?: number;
  log: (line: string) => void;
}

const messageOf = (err: unknown) => (err instanceof Error ? err.message : String(err));
const sum = (values: Iterable<number>) => [...values].reduce((a, b) => a + b, 0);
const perCall = (counts: ReadonlyMap<string, number>, calls: number) => Object.fromEntries([...counts].map(([k, v]) => [k, v / calls]));

export interface Comparison {
  results: LevelResult[];
  /** Systems that could not start, with why (e.g. no Redis): the others still run. */
  skipped: Array<{ id: string; reason: string }>;
}

export async function compareSystems(options: CompareOptions): Promise<Comparison> {
  const { log } = options;
  const systems: BenchSystem[] = [];
  const results: LevelResult[] = [];
  const skipped: Comparison["skipped"] = [];
  try {
    for (const factory of options.factories) {
      log(`start ${factory.id}`);
      try {
        systems.push(await factory.start());
      } catch (err) {
        const reason = messageOf(err);
        log(`  SKIPPED ${factory.id}: ${reason}`);
        skipped.push({ id: factory.id, reason });
      }
    }
    for (const system of [...systems]) {
      log(`warm-up ${system.id}: ${options.warmupSeconds} s, 10 in flight`);
      try {
        const warmUp = { concurrency: 10, seconds: options.warmupSeconds };
        await system.prepare(warmUp);
        await system.level(warmUp);
      } catch (err) {
        const reason = messageOf(err);
        log(`  SKIPPED ${system.id}, its warm-up failed: ${reason}`);
        skipped.push({ id: system.id, reason: `warm-up failed: ${reason}` });
        systems.splice(systems.indexOf(system), 1);
        await system.stop();
      }
    }
    const paced = options.rate ? `, paced to ${options.rate}/s` : "";
    for (let round = 1; round <= options.rounds; round++) {
      // Every other round takes the systems the other way round: none is always measured first (a
      // warmer machine, a neighbour's leftover work), which would bias a before/after comparison.
      const inTurn = round % 2 === 1 ? [...systems] : [...systems].reverse();
      for (const concurrency of options.levels) {
        for (const system of inTurn) {
          const others = systems.filter((s) => s !== system).flatMap((s) => [...s.pids.values()]);
          log(`${system.id}: ${concurrency} in flight${paced}, ${options.seconds} s${options.rounds > 1 ? `, round ${round}/${options.rounds}` : ""}`);
          const r = { ...(await measureLevel(system, { concurrency, seconds: options.seconds, rate: options.rate }, others)), round };
          log(
            r.error
              ? `  FAILED: ${r.error.split("\n")[0]}`
              : `  ${Math.round(r.callsPerSec)}/s, p50 ${r.p50.toFixed(2)} ms, p99 ${r.p99.toFixed(2)} ms, CPU ${r.cpuMsTotal.toFixed(2)} ms/call, ${r.writesPerCall.toFixed(2)} writes/call, ${r.messagesPerCall.toFixed(1)} ${r.messageUnit}/call`,
          );
          results.push(r);
        }
      }
    }
  } finally {
    for (const system of systems.reverse()) {
      log(`stop ${system.id}`);
      await system.stop().catch((err: unknown) => log(`  stop ${system.id} failed: ${String(err)}`));
    }
  }
  return { results, skipped };
}

async function measureLevel(system: BenchSystem, command: LevelCommand, others: number[]): Promise<LevelResult> {
  const usage = () => ({
    cpu: new Map([...system.pids].map(([role, pid]) => [role, processCpuMs(pid)])),
    syscalls: new Map([...system.pids].map(([role, pid]) => [role, processSyscalls(pid)])),
    others: sum(others.map(processCpuMs)),
  });
  const base = { round: 0, id: system.id, name: system.name, concurrency: command.concurrency, seconds: command.seconds, messageUnit: system.messageUnit };
  try {
    await system.prepare(command);
    const before = await system.snapshot();
    const usageBefore = usage();
    const outcome = await system.level(command);
    // Settled: the last calls' trailing writes belong to them, and so does the CPU they take.
    const after = await system.snapshot();
    const usageAfter = usage();
    const { calls } = outcome;
    const writes = countersBetween(before.writes, after.writes);
    const messages = countersBetween(before.messages, after.messages);
    const cpu = countersBetween(usageBefore.cpu, usageAfter.cpu);
    for (const role of system.pids.keys()) if (!cpu.has(role)) cpu.set(role, 0);
    const syscalls = new Map([...system.pids.keys()].map((role) => [role, usageAfter.syscalls.get(role)! - usageBefore.syscalls.get(role)!]));
    return {
      ...base,
      calls,
      callsPerSec: (calls / outcome.elapsedMs) * 1000,
      p50: outcome.p50,
      p95: outcome.p95,
      p99: outcome.p99,
      mean: outcome.mean,
      cpuMs: perCall(cpu, calls),
      cpuMsTotal: sum(cpu.values()) / calls,
      syscalls: perCall(syscalls, calls),
      writesPerCall: sum(writes.values()) / calls,
      writes: perCall(writes, calls),
      messagesPerCall: sum(messages.values()) / calls,
      messages: perCall(messages, calls),
      idleOthersCpuMs: usageAfter.others - usageBefore.others,
    };
  } catch (err) {
    const nan = Number.NaN;
    return {
      ...base,
      calls: 0,
      callsPerSec: nan,
      p50: nan,
      p95: nan,
      p99: nan,
      mean: nan,
      cpuMs: {},
      cpuMsTotal: nan,
      syscalls: {},
      writesPerCall: nan,
      writes: {},
      messagesPerCall: nan,
      messages: {},
      idleOthersCpuMs: nan,
      error: messageOf(err),
    };
  }
}

/**
 * One result per system and level: each figure the median of its rounds (a failed round left out),
 * calls summed, the spread of calls/s kept. A single round is returned as it is.
 */
export function medianOfRounds(results: readonly LevelResult[]): LevelResult[] {
  const groups = new Map<string, LevelResult[]>();
  for (const r of results) groups.set(`${r.id} ${r.concurrency}`, [...(groups.get(`${r.id} ${r.concurrency}`) ?? []), r]);
  return [...groups.values()].map((all) => {
    const ok = all.filter((r) => !r.error);
    if (all.length === 1 || ok.length === 0) return all[0]!;
    const med = (pick: (r: LevelResult) => number) => median(ok.map(pick));
    const medMap = (pick: (r: LevelResult) => Record<string, number>) =>
      Object.fromEntries([...new Set(ok.flatMap((r) => Object.keys(pick(r))))].map((k) => [k, med((r) => pick(r)[k] ?? 0)]));
    const rates = ok.map((r) => r.callsPerSec);
    return {
      ...ok[0]!,
      round: ok.length,
      calls: sum(ok.map((r) => r.calls)),
      callsPerSec: med((r) => r.callsPerSec),
      p50: med((r) => r.p50),
      p95: med((r) => r.p95),
      p99: med((r) => r.p99),
      mean: med((r) => r.mean),
      cpuMs: medMap((r) => r.cpuMs),
      cpuMsTotal: med((r) => r.cpuMsTotal),
      syscalls: medMap((r) => r.syscalls),
      writesPerCall: med((r) => r.writesPerCall),
      writes: medMap((r) => r.writes),
      messagesPerCall: med((r) => r.messagesPerCall),
      messages: medMap((r) => r.messages),
      idleOthersCpuMs: med((r) => r.idleOthersCpuMs),
      callsPerSecRange: [Math.min(...rates), Math.max(...rates)],
      ...(ok.length < all.length ? { error: `${all.length - ok.length} of ${all.length} rounds failed: ${all.find((r) => r.error)!.error}` } : {}),
    };
  });
}
