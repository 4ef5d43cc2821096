/**
 * The BullMQ peer (bench/lib/systems/bullmq-process.ts) on the machine's Redis. The server is shared,
 * so its counters are read as differences (INFO commandstats) and the queue lives under a prefix of
 * this run, removed at the end. Writes: the calls of Redis commands flagged `write`, scripts' inner
 * calls included (Redis counts those in commandstats); messages: the calls of every command.
 */
import { randomUUID } from "node:crypto";
import { createConnection } from "node:net";
import { fileURLToPath } from "node:url";
import { Redis } from "ioredis";
import { startPeer } from "./peer.js";
import type { BenchSystem } from "./system.js";

export const BULLMQ_QUEUE = "tool-calls";
/** What this driver itself sends between levels: no part of any call. */
const DRIVER_COMMANDS = new Set(["info", "command", "command|info", "config", "config|get", "scan", "client|setname", "client", "select"]);

export function redisPort(): number {
  return Number(process.env.BENCH_REDIS_PORT ?? 6379);
}

/** Resolves whether something listens on the Redis port, within a second. */
function redisListening(): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: "127.0.0.1", port: redisPort(), timeout: 1_000 });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.once("connect", () => done(true));
    socket.once("error", () => done(false));
    socket.once("timeout", () => done(false));
  });
}

/** `field:value` lines of an INFO section. */
function infoFields(text: string): Map<string, string> {
  return new Map(
    text
      .split("\r\n")
      .filter((l) => l.includes(":") && !l.startsWith("#"))
      .map((l) => [l.slice(0, l.indexOf(":")), l.slice(l.indexOf(":") + 1)]),
  );
}

export async function startBullmq(dir: string, log: (line: string) => void): Promise<BenchSystem> {
  if (!(await redisListening()))
    throw new Error(`no Redis on 127.0.0.1:${redisPort()}: start one (Debian: apt-get install -y redis-server) or set BENCH_REDIS_PORT`);
  const redis = new Redis({ host: "127.0.0.1", port: redisPort(), lazyConnect: true, maxRetriesPerRequest: 1, connectionName: "toolgate-bench-driver" });
  await redis.connect();
  const server = infoFields(await redis.info("server"));
  const persistence = infoFields(await redis.info("persistence"));
  const prefix = `toolgate-bench-${randomUUID().slice(0, 8)}`;
  const { version } = (await import("bullmq/package.json", { with: { type: "json" } })).default as { version: string };
  // What a write costs depends on it: the machine's Redis may keep everything in memory only.
  const [, save] = (await redis.call("CONFIG", "GET", "save")) as [string, string];
  const durability =
    persistence.get("aof_enabled") === "1"
      ? `AOF, appendfsync ${((await redis.call("CONFIG", "GET", "appendfsync")) as string[])[1]}`
      : save
        ? `RDB snapshots "${save}", no AOF`
        : "in memory only: no AOF, no snapshots";
  log(`bullmq ${version}: Redis ${server.get("redis_version")} on 127.0.0.1:${redisPort()} (${durability}), prefix ${prefix}`);

  const writeFlag = new Map<string, boolean>();
  const isWrite = async (command: string): Promise<boolean> => {
    if (!writeFlag.has(command)) {
      // COMMAND INFO: [[name, arity, flags, ...]]; a subcommand (`config|get`) is asked by its container.
      const [info] = (await redis.call("COMMAND", "INFO", command.split("|")[0]!)) as [[string, number, string[]] | null];
      writeFlag.set(command, info?.[2]?.includes("write") ?? false);
    }
    return writeFlag.get(command)!;
  };
  const snapshot = async () => {
    const writes = new Map<string, number>();
    const messages = new Map<string, number>();
    for (const [key, value] of infoFields(await redis.info("commandstats"))) {
      const command = key.replace(/^cmdstat_/, "");
      if (DRIVER_COMMANDS.has(command)) continue;
      const calls = Number(/calls=(\d+)/.exec(value)?.[1] ?? 0);
      messages.set(command, calls);
      if (await isWrite(command)) writes.set(command, calls);
    }
    return { writes, messages };
  };
  /** Everything under the prefix, whatever BullMQ made. */
  const removeQueue = async () => {
    let cursor = "0";
    do {
      const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}:*`, "COUNT", 1000);
      if (keys.length > 0) await redis.del(...keys);
      cursor = next;
    } while (cursor !== "0");
    redis.disconnect();
  };
  return startPeer({
    id: "bullmq",
    name: `BullMQ ${version}, Redis ${server.get("redis_version")} (${durability})`,
    messageUnit: "Redis commands",
    entry: fileURLToPath(new URL("./bullmq-process.ts", import.meta.url)),
    env: { BENCH_BULLMQ_PREFIX: prefix, BENCH_REDIS_PORT: String(redisPort()) },
    dir,
    server: ["redis-server", Number(server.get("process_id"))],
    snapshot,
    stopServer: removeQueue,
  });
}
