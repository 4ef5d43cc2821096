import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { Kvm, type KV } from "@nats-io/kv";
import { RunRecord } from "../../../src/execution/model/records.js";
import { RunLookup } from "../../../src/execution/runs/run-lookup.js";
import { VersionedStore, type Versioned } from "../../../src/kv/versioned-store.js";
import { startTestNats, type TestNats } from "../../helpers/nats.js";

const BUCKET = "run_lookup_test";

const run = (runId: string, state: RunRecord["state"] = "active"): RunRecord => ({
  run_id: runId,
  session_id: "s1",
  agent: "bot",
  agent_version: "bot.1",
  toolset: "ts",
  toolset_version: "ts.1",
  subject: "user-1",
  state,
  assignment_ids: [],
  created_at: 1,
  ended_at: null,
});

/** A caller that acts on any run this process remembers. */
const anyRun = (): boolean => true;

/** The store with every read it was asked for kept, so a test can wait for one to finish. */
class WatchedStore<T> extends VersionedStore<T> {
  readonly reads: Array<{ key: string; read: Promise<Versioned<T> | null> }> = [];
  override get(key: string): Promise<Versioned<T> | null> {
    const read = super.get(key);
    this.reads.push({ key, read });
    return read;
  }
}

describe("RunLookup: the run read beside its assignment", () => {
  let nats: TestNats;
  let nc: NatsConnection;
  let kv: KV;
  let runs: VersionedStore<RunRecord>;

  beforeAll(async () => {
    nats = await startTestNats();
    nc = await connect({ servers: nats.url });
    kv = await new Kvm(nc).create(BUCKET);
    runs = new VersionedStore(kv, RunRecord, { bucket: BUCKET, nc, js: jetstream(nc), jsm: await jetstreamManager(nc) });
    await runs.create("run_a", run("run_a"));
    await runs.create("run_b", run("run_b"));
  });
  afterAll(async () => {
    await nc?.close();
    await nats?.stop();
  });

  it("reads the run of an unknown assignment fresh, then remembers which run it belongs to", async () => {
    const lookup = new RunLookup(runs);
    expect((await lookup.start("asg_1").of({ assignment_id: "asg_1", run_id: "run_a" }, anyRun))?.value.run_id).toBe("run_a");
    // Ended meanwhile: the early read of a remembered run is still a read of the current record.
    const current = await runs.get("run_a");
    await runs.mutate("run_a", (r) => ({ write: { ...r, state: "cancelled", ended_at: 2 }, result: undefined }), current!);
    const early = lookup.start("asg_1");
    expect((await early.of({ assignment_id: "asg_1", run_id: "run_a" }, anyRun))?.value.state).toBe("cancelled");
  });

  it("never hands out the early read of another run than the assignment's", async () => {
    const lookup = new RunLookup(runs);
    lookup.remember("asg_2", "run_a");
    expect((await lookup.start("asg_2").of({ assignment_id: "asg_2", run_id: "run_b" }, anyRun))?.value.run_id).toBe("run_b");
  });

  it("reads a remembered run early, and forgets the oldest facts beyond its capacity", async () => {
    const watched = new WatchedStore(kv, RunRecord, { bucket: BUCKET, nc, js: jetstream(nc), jsm: await jetstreamManager(nc) });
    const lookup = new RunLookup(watched, 2);
    lookup.remember("asg_x", "run_b");
    lookup.remember("asg_y", "run_b");
    lookup.remember("asg_z", "run_b");
    const before = (await runs.get("run_b"))!;
    const forgotten = lookup.start("asg_x");
    const remembered = lookup.start("asg_z");
    // Only the remembered one started a read; once it has finished, the run moves on.
    expect(watched.reads.map((r) => r.key)).toEqual(["run_b"]);
    await watched.reads[0]!.read;
    await runs.mutate("run_b", (r) => ({ write: { ...r, assignment_ids: ["asg_z"] }, result: undefined }), before);
    // The remembered one was read when started; the forgotten one only when asked for.
    expect((await remembered.of({ assignment_id: "asg_z", run_id: "run_b" }, anyRun))?.revision).toBe(before.revision);
    expect((await forgotten.of({ assignment_id: "asg_x", run_id: "run_b" }, anyRun))?.revision).toBeGreaterThan(before.revision);
  });

  it("an early read nobody asks for cannot fail the process", async () => {
    const other = await connect({ servers: nats.url });
    const kv = await new Kvm(other).open(BUCKET);
    const lookup = new RunLookup(new VersionedStore(kv, RunRecord, { bucket: BUCKET, nc: other, js: jetstream(other), jsm: await jetstreamManager(other) }));
    lookup.remember("asg_3", "run_a");
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on("unhandledRejection", onUnhandled);
    try {
      const read = lookup.start("asg_3");
      // close() fails the pending read before it resolves; Node reports a rejection nobody handles
      // once the microtasks of that turn have run, so one turn of the event loop is enough to see it.
      await other.close();
      await new Promise((r) => setImmediate(r));
      expect(unhandled).toEqual([]);
      // Asked for after all, the failure reaches the one who asks.
      await expect(read.of({ assignment_id: "asg_3", run_id: "run_a" }, anyRun)).rejects.toThrow();
    } finally {
      process.off("unhandledRejection", onUnhandled);
    }
  });
});
