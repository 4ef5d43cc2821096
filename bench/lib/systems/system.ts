import type { BenchChild } from "../child.js";
import type { LevelCommand, LevelOutcome } from "../closed-loop.js";

/** Counters of a system's store and transport so far; a level's cost is the difference of two. */
export interface Snapshot {
  /** Persisted writes by where they went: a stream's messages (KV buckets are streams), a Redis write command. */
  writes: Map<string, number>;
  /** Messages by kind: `<role> in` / `<role> out` through nats-server, or a Redis command's calls. */
  messages: Map<string, number>;
}

/** One of the compared systems, its processes running (each in its own), ready for its levels. */
export interface BenchSystem {
  /** Short id (`BENCH_SYSTEMS`), e.g. `toolgate-protocol`, `bullmq`. */
  readonly id: string;
  /** How the table names it. */
  readonly name: string;
  /** What `messages` counts. */
  readonly messageUnit: "NATS messages" | "Redis commands";
  /** The pid of each of its processes by role (producer, workers, gateway, nats-server, ...). */
  readonly pids: ReadonlyMap<string, number>;
  /** What the level needs beforehand that is no part of a call (toolgate: the runs the calls go into). */
  prepare(command: LevelCommand): Promise<void>;
  /** One level in its producer process: a closed loop, or paced (`LevelCommand.rate`). */
  level(command: LevelCommand): Promise<LevelOutcome>;
  /** Its counters, once the last call's writes have landed. */
  snapshot(): Promise<Snapshot>;
  stop(): Promise<void>;
}

/** A system's `prepare` and `level`, through the channel to its producer process (bench/lib/closed-loop.ts). */
export function producerLevels(producer: BenchChild): Pick<BenchSystem, "prepare" | "level"> {
  return {
    prepare: async (command) => void (await producer.request({ ...command, prepare: true })),
    level: (command) => producer.request<LevelOutcome>(command),
  };
}

/** `after - before` per key, keys that did not move left out. */
export function countersBetween(before: ReadonlyMap<string, number>, after: ReadonlyMap<string, number>): Map<string, number> {
  const out = new Map<string, number>();
  for (const [key, value] of after) {
    const n = value - (before.get(key) ?? 0);
    if (n > 0) out.set(key, n);
  }
  return out;
}
