import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { AckPolicy, RetentionPolicy, StorageType } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { startBenchNats } from "../bench-nats.js";
import { freePort, spawnBenchChild, waitForLine, type BenchChild } from "../child.js";
import { producerLevels, type BenchSystem } from "./system.js";

/**
 * `toolgate-floor` (bench/lib/systems/toolgate-floor-process.ts): toolgate's traffic for a read tool
 * call with none of its work, on a nats-server of its own. Its writes per call, as toolgate's with
 * protocol executors at 100 in flight (8.2, `docs/performance.md`), less the claim slot (0.16 there):
 * the creation's watch, the assignment's three writes, the candidate, the run's listing, the receipts
 * and the run's event: 8.
 */
export const FLOOR = {
  assignments: "fl_assignments",
  runs: "fl_runs",
  candidates: "FL_CANDIDATES",
  candidateSubject: "fl.cand",
  candidateConsumer: "executors",
  receipts: "FL_RECEIPTS",
  receiptSubject: "fl.rcpt",
  receiptConsumer: "gateway",
  events: "FL_EVENTS",
  eventSubject: "fl.evt",
  createSubject: "fl.create",
  claimSubject: "fl.claim",
  answerSubject: "fl.ans",
  /** The first byte of a completed record, which the producer's watch waits for. */
  completedMark: 3,
} as const;

/**
 * Payload bytes of each message, as toolgate sends them for the bench's call (msgpack; its
 * `BENCH_RESULT` of ~500 bytes): measured on the wire (`strace` of the gateway, 2026-12-07).
 */
export const FLOOR_BYTES = {
  watch: 60,
  created: 760,
  claimed: 1130,
  completed: 2070,
  run: 470,
  candidate: 150,
  claim: 85,
  grant: 650,
  chain: 1250,
  event: 1060,
  answer: 150,
  response: 780,
} as const;
export type FloorPayload = keyof typeof FLOOR_BYTES;

/**
 * Parts of toolgate's design the floor can leave out (`BENCH_FLOOR_DROP=watch,listing,http`), to
 * measure what each costs at the floor: the creation's watch and its erase (a write, 3 messages),
 * the run's listing of the call (a write, 2 messages), HTTP (the call made by a NATS request instead).
 */
export const FLOOR_PARTS = ["watch", "listing", "http"] as const;
type FloorPart = (typeof FLOOR_PARTS)[number];

export function floorDrops(): ReadonlySet<FloorPart> {
  const asked = (process.env.BENCH_FLOOR_DROP ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  const unknown = asked.filter((p) => !(FLOOR_PARTS as readonly string[]).includes(p));
  if (unknown.length > 0) throw new Error(`BENCH_FLOOR_DROP: unknown ${unknown.join(", ")}; known: ${FLOOR_PARTS.join(", ")}`);
  return new Set(asked as FloorPart[]);
}

/**
 * What the floor's processes do at each step (`BENCH_FLOOR_WORK`, set by the system that starts them):
 * `none`, bytes of toolgate's sizes (`toolgate-floor`); `lean`, what toolgate's guarantees need, with
 * toolgate's own functions (`toolgate-lean`, bench/lib/systems/toolgate-lean-work.ts).
 */
export const FLOOR_WORKS = ["none", "lean"] as const;
export type FloorWork = (typeof FLOOR_WORKS)[number];

export function floorWork(): FloorWork {
  const work = process.env.BENCH_FLOOR_WORK ?? "none";
  if (!(FLOOR_WORKS as readonly string[]).includes(work)) throw new Error(`BENCH_FLOOR_WORK=${work}: one of ${FLOOR_WORKS.join(", ")}`);
  return work as FloorWork;
}

export const startToolgateFloor = (dir: string, log: (line: string) => void) => startFloorSystem("none", dir, log);
export const startToolgateLean = (dir: string, log: (line: string) => void) => startFloorSystem("lean", dir, log);

/** Each work's system: its id, what its processes do, and its name in the reports. */
const FLOOR_SYSTEMS: Record<FloorWork, { id: string; does: string; name: string }> = {
  none: { id: "toolgate-floor", does: "no work", name: "toolgate's traffic, no work (floor)" },
  lean: { id: "toolgate-lean", does: "the lean work", name: "toolgate's traffic, lean work" },
};

async function startFloorSystem(work: FloorWork, dir: string, log: (line: string) => void): Promise<BenchSystem> {
  const { id, does, name } = FLOOR_SYSTEMS[work];
  const drops = floorDrops();
  const nats = await startBenchNats(join(dir, "nats"));
  const children: BenchChild[] = [];
  const stop = async () => {
    for (const c of children.reverse()) await c.stop();
    await nats.stop();
  };
  try {
    // File storage, one replica, as toolgate's own streams and buckets.
    const kvm = new Kvm(nats.nc);
    await kvm.create(FLOOR.assignments, { history: 1, storage: StorageType.File });
    await kvm.create(FLOOR.runs, { history: 1, storage: StorageType.File });
    const stream = { storage: StorageType.File, num_replicas: 1 };
    await nats.jsm.streams.add({ ...stream, name: FLOOR.candidates, subjects: [`${FLOOR.candidateSubject}.>`], retention: RetentionPolicy.Workqueue });
    await nats.jsm.streams.add({ ...stream, name: FLOOR.receipts, subjects: [`${FLOOR.receiptSubject}.>`], retention: RetentionPolicy.Limits });
    // Events are kept a minute (nanoseconds): the stream stays small over a long run.
    await nats.jsm.streams.add({
      ...stream,
      name: FLOOR.events,
      subjects: [`${FLOOR.eventSubject}.>`],
      retention: RetentionPolicy.Limits,
      max_age: 60_000_000_000,
    });
    await nats.jsm.consumers.add(FLOOR.candidates, { durable_name: FLOOR.candidateConsumer, ack_policy: AckPolicy.Explicit, max_ack_pending: 10_000 });
    await nats.jsm.consumers.add(FLOOR.receipts, { durable_name: FLOOR.receiptConsumer, ack_policy: AckPolicy.Explicit, max_ack_pending: 10_000 });
    log(`${id}: toolgate's traffic with ${does} on ${nats.server.url}`);

    const entry = fileURLToPath(new URL("./toolgate-floor-process.ts", import.meta.url));
    const env = { NATS_URL: nats.server.url, BENCH_GATEWAY_PORT: String(await freePort()), BENCH_FLOOR_WORK: work };
    const spawn = (role: string) => {
      const child = spawnBenchChild(`${id}-${role}`, entry, [role], env, join(dir, `${role}.log`));
      children.push(child);
      return child;
    };
    const gateway = spawn("gateway");
    await waitForLine(gateway, "ready");
    const workers = spawn("workers");
    const producer = spawn("producer");
    await Promise.all([waitForLine(workers, "ready"), waitForLine(producer, "ready")]);
    return {
      id,
      name: `${name}${drops.size > 0 ? `, without ${[...drops].join(", ")}` : ""}`,
      messageUnit: "NATS messages",
      pids: new Map([
        ["gateway", gateway.child.pid!],
        ["executors", workers.child.pid!],
        ["producer", producer.child.pid!],
        ["nats-server", nats.server.child.pid!],
      ]),
      ...producerLevels(producer),
      snapshot: () => nats.snapshot(),
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
