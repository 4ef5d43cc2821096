/** The systems a comparison bench can run, by the ids `BENCH_SYSTEMS` takes. */
import { join } from "node:path";
import type { SystemFactory } from "../compare.js";
import type { ToolgateTree } from "../toolgate-tree.js";
import { startBullmq } from "./bullmq.js";
import { startJetStreamQueue } from "./jetstream-queue.js";
import { startNatsRequest } from "./nats-request.js";
import type { BenchSystem } from "./system.js";
import { startToolgateFloor, startToolgateLean } from "./toolgate-floor.js";
import { startToolgate, type ExecutorKind } from "./toolgate.js";

export const SYSTEM_IDS = ["toolgate-protocol", "toolgate-runner", "toolgate-floor", "toolgate-lean", "bullmq", "jetstream", "nats"] as const;
export type SystemId = (typeof SYSTEM_IDS)[number];

/** The systems that run a toolgate tree (this one, and a baseline's as `<id>@<commit>`). */
const TOOLGATE_SYSTEMS = ["toolgate-protocol", "toolgate-runner"] as const;

type ToolgateSystem = (typeof TOOLGATE_SYSTEMS)[number];

/** Whether a system id, or a result's (`toolgate-protocol@abc1234`), runs a toolgate tree. */
export function runsToolgate(id: string): id is ToolgateSystem {
  return (TOOLGATE_SYSTEMS as readonly string[]).includes(id.split("@")[0]!);
}

const PEERS: Record<Exclude<SystemId, ToolgateSystem>, (dir: string, log: (line: string) => void) => Promise<BenchSystem>> = {
  "toolgate-floor": startToolgateFloor,
  "toolgate-lean": startToolgateLean,
  bullmq: startBullmq,
  jetstream: startJetStreamQueue,
  nats: startNatsRequest,
};

/** The factories of `ids`, a toolgate id once per tree (the baseline first, so each pair runs back to back). */
export function systemFactories(ids: readonly SystemId[], trees: readonly ToolgateTree[], dir: string, log: (line: string) => void): SystemFactory[] {
  return ids.flatMap((id): SystemFactory[] => {
    if (runsToolgate(id)) {
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
