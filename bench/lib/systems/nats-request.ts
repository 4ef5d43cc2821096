/** The core NATS request/reply peer (bench/lib/systems/nats-request-process.ts) on its own nats-server. */
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startBenchNats } from "../bench-nats.js";
import { startNatsPeer } from "./peer.js";
import type { BenchSystem } from "./system.js";

export async function startNatsRequest(dir: string, log: (line: string) => void): Promise<BenchSystem> {
  const nats = await startBenchNats(join(dir, "nats"));
  log(`nats: request/reply on ${nats.server.url}`);
  return startNatsPeer(nats, {
    id: "nats",
    name: "core NATS request/reply (not persisted)",
    entry: fileURLToPath(new URL("./nats-request-process.ts", import.meta.url)),
    dir,
  });
}
