/** The systems a comparison bench can run, by the ids `BENCH_SYSTEMS` takes. */
import { join } from "node:path";
import type { SystemFactory } from "../compare.js";
import type { ToolgateTree } from "../toolgate-tree.js";
import { startBullmq } from "./bullmq.js";
import { startJetStreamQueue } from "./jetstream-queue.js";
import { startNatsRequest } from "./nats-request.js";
import type { BenchSystem } from "./system.js";
import { startToolgate, type ExecutorKind } from "./toolgate.js";

export const SYSTEM_IDS = ["toolgate-protocol", "toolgate-runner", "bullmq", "jetstream", "nats"] as const;
export type SystemId = (typeof SYSTEM_IDS)[number];

const PEERS: Record<Exclude<SystemId, `toolgate-${string}`>, (dir: string, log: (line: string) => void) => Promise<BenchSystem>> = {
  bullmq: startBullmq,
  jetstream: startJetStreamQueue,
  nats: startNatsRequest,
};

/** The factories of `ids`, a toolgate id once per tree (the baseline first, so each pair runs back to back). */
export function systemFactories(ids: readonly SystemId[], trees: readonly ToolgateTree[], dir: string, log: (line: string) => void): SystemFactory[] {
  return ids.flatMap((id): SystemFactory[] => {
    if (id === "toolgate-protocol" || id === "toolgate-runner") {
      const kind = id.slice("toolgate-".length) as ExecutorKind;
      return trees.map((tree) => ({ id: `${id}${tree.label}`, start: () => startToolgate(tree, kind, join(dir, `${id}${tree.label}`), log) }));
    }
    return [{ id, start: () => PEERS[id](join(dir, id), log) }];
  });
}

/** `BENCH_SYSTEMS=a,b` checked against the known ids, else `defaults`. */
export function systemIdsFromEnv(defaults: readonly SystemId[]): SystemId[] {
  const asked = process.env.BENCH_SYSTEMS?.split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  if (!asked) return [...defaults];
  const unknown = asked.filter((id) => !(SYSTEM_IDS as readonly string[]).includes(id));
  if (unknown.length > 0) throw new Error(`BENCH_SYSTEMS: unknown ${unknown.join(", ")}; known: ${SYSTEM_IDS.join(", ")}`);
  return asked as SystemId[];
}
