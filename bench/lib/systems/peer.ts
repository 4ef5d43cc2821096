/** A peer of toolgate: its workers and its producer, each in its own process, beside the server they use. */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { BenchNats } from "../bench-nats.js";
import { spawnBenchChild, waitForLine, type BenchChild } from "../child.js";
import { producerLevels, type BenchSystem } from "./system.js";

export interface PeerOptions extends Pick<BenchSystem, "id" | "name" | "messageUnit" | "snapshot"> {
  /** The peer's process module, run as `<entry> workers` and `<entry> producer`. */
  entry: string;
  env: Record<string, string>;
  /** Where the logs go. */
  dir: string;
  /** The server's process by role (`nats-server`, `redis-server`). */
  server: [string, number];
  /** Stops (or cleans) the server once both processes are gone. */
  stopServer(): Promise<void>;
}

export async function startPeer(options: PeerOptions): Promise<BenchSystem> {
  mkdirSync(options.dir, { recursive: true });
  const children: BenchChild[] = [];
  const stop = async () => {
    for (const c of children.reverse()) await c.stop();
    await options.stopServer();
  };
  let workers: BenchChild;
  let producer: BenchChild;
  try {
    workers = spawnBenchChild(`${options.id}-workers`, options.entry, ["workers"], options.env, join(options.dir, "workers.log"));
    children.push(workers);
    producer = spawnBenchChild(`${options.id}-producer`, options.entry, ["producer"], options.env, join(options.dir, "producer.log"));
    children.push(producer);
    await Promise.all([waitForLine(workers, "ready"), waitForLine(producer, "ready")]);
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    id: options.id,
    name: options.name,
    messageUnit: options.messageUnit,
    pids: new Map([["producer", producer.child.pid!], ["workers", workers.child.pid!], options.server]),
    ...producerLevels(producer),
    snapshot: options.snapshot,
    stop,
  };
}

/** A peer on a bench-owned nats-server of its own. */
export function startNatsPeer(nats: BenchNats, options: Pick<PeerOptions, "id" | "name" | "entry" | "dir">): Promise<BenchSystem> {
  return startPeer({
    ...options,
    messageUnit: "NATS messages",
    env: { NATS_URL: nats.server.url },
    server: ["nats-server", nats.server.child.pid!],
    snapshot: () => nats.snapshot(),
    stopServer: () => nats.stop(),
  });
}
