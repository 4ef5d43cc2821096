import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { bucketStores, executionStores } from "../../../src/kv/buckets.js";
import { AssignmentRecord, WatchEntry } from "../../../src/execution/model/records.js";
import { ensureStreams, loadDefinitions } from "../../../src/streams/index.js";
import { watchlistOn } from "../../helpers/watches.js";
import type { VersionedStore } from "../../../src/kv/versioned-store.js";
import { Watchlist } from "../../../src/execution/claims/watchlist.js";
import { startTestNats, type TestNats } from "../../helpers/nats.js";

const BUCKET = "watch_markers";

/** The keys that still have a message in the bucket's stream (a live value or a removal marker). */
async function keysInStream(jsm: JetStreamManager): Promise<string[]> {
  const info = await jsm.streams.info(`KV_${BUCKET}`, { subjects_filter: `$KV.${BUCKET}.>` });
  return Object.keys(info.state.subjects ?? {})
    .map((s) => s.slice(`$KV.${BUCKET}.`.length))
    .sort();
}

describe("the watchlist's removal markers", () => {
  let nats: TestNats;
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  let store: VersionedStore<WatchEntry>;
  let watchlist: Watchlist;

  beforeAll(async () => {
    nats = await startTestNats();
    nc = await connect({ servers: nats.url });
    jsm = await jetstreamManager(nc);
    await new Kvm(nc).create(BUCKET, { history: 1 });
    store = await (await bucketStores(nc))(BUCKET, WatchEntry);
    watchlist = new Watchlist({ store, prefix: "" });
  });
  afterAll(async () => {
    await nc?.close();
    await nats?.stop();
  });

  it("a released watch leaves nothing behind: no marker for a sweep to list or purge", async () => {
    await watchlist.watch("asg-released", 0);
    await watchlist.watch("asg-live", 0);
    await watchlist.release("asg-released");
    expect(await keysInStream(jsm)).toEqual(["asg-live"]);
    expect((await watchlist.due(Date.now())).map((d) => ("assignment_id" in d.entry ? d.entry.assignment_id : d.entry.run_id))).toEqual(["asg-live"]);
    expect((await store.list()).removed).toEqual([]);
    await watchlist.release("asg-live");
    await watchlist.release("asg-never-watched");
    expect(await keysInStream(jsm)).toEqual([]);
  });

  it("are purged by the next listing, so a sweep lists the work in flight and not every assignment ever watched", async () => {
    const done1 = await watchlist.watch("asg-done-1", 0);
    const done2 = await watchlist.watch("asg-done-2", 0);
    await watchlist.watch("asg-running", 0);
    await watchlist.unwatch("asg-done-1", done1);
    await watchlist.unwatch("asg-done-2", done2);
    // A watch removed at its revision (a sweeper done with it) leaves its marker as the key's last message.
    expect(await keysInStream(jsm)).toEqual(["asg-done-1", "asg-done-2", "asg-running"]);

    expect((await watchlist.due(Date.now())).map((d) => ("assignment_id" in d.entry ? d.entry.assignment_id : d.entry.run_id))).toEqual(["asg-running"]);
    // The purge runs beside the sweep.
    await watchlist.settled();
    expect(await keysInStream(jsm)).toEqual(["asg-running"]);
    const listing = await store.list();
    expect(listing.removed).toEqual([]);
    expect(listing.live.map((e) => e.key)).toEqual(["asg-running"]);
  });

  it("are purged only up to their own revision: a watch written again since the marker stays", async () => {
    const revision = await watchlist.watch("asg-again", 0);
    await watchlist.unwatch("asg-again", revision);
    const { removed } = await store.list();
    const marker = removed.find((r) => r.key === "asg-again");
    expect(marker).toBeDefined();
    // Watched again (a newer revision) after the listing saw the marker, before the purge.
    await watchlist.watch("asg-again", 42);
    await store.purgeRemoved([marker!]);
    const after = await store.get("asg-again");
    expect(after?.value).toEqual({ assignment_id: "asg-again", due_at: 42 });
    expect(await watchlist.watchedIds()).toContain("asg-again");
  });
});

/**
 * Where watches are kept, by store layout: keys of the assignments bucket from 6 on (`w.<id>`,
 * `w.end.<run>`), entries of the watch bucket before. A gateway reads both places and moves what it
 * finds in the other to its own, so a cluster changing its layout, either way, keeps every watch.
 */
describe("the watchlist's two places", () => {
  let nats: TestNats;
  let nc: NatsConnection;
  let assignmentsBucket: VersionedStore<WatchEntry>;
  let watchBucket: VersionedStore<WatchEntry>;
  let records: VersionedStore<AssignmentRecord>;

  beforeAll(async () => {
    nats = await startTestNats();
    nc = await connect({ servers: nats.url });
    await ensureStreams(await jetstreamManager(nc), loadDefinitions(), { replicas: 1 });
    const store = await executionStores(nc);
    [assignmentsBucket, watchBucket, records] = await Promise.all([
      store("assignments", WatchEntry),
      store("watch", WatchEntry),
      store("assignments", AssignmentRecord),
    ]);
  });
  afterAll(async () => {
    await nc?.close();
    await nats?.stop();
  });

  const idsOf = (due: Array<{ entry: WatchEntry }>) => due.map(({ entry }) => ("assignment_id" in entry ? entry.assignment_id : `end.${entry.run_id}`)).sort();
  const liveKeys = async (store: VersionedStore<WatchEntry>, filter: string) => (await store.entries(filter)).map((e) => e.key).sort();

  it("from store layout 6 keeps them beside the assignments, apart from the assignments themselves", async () => {
    const watchlist = await watchlistOn(nc, 6);
    await watchlist.watch("asg_six", 0);
    await watchlist.watchRunEnd("run_six", 0);
    // An assignment in the same bucket is no watch, and a watch no assignment.
    await records.create("asg_six", { assignment_id: "asg_six" } as AssignmentRecord).catch(() => undefined);
    expect(await liveKeys(assignmentsBucket, "w.>")).toEqual(["w.asg_six", "w.end.run_six"]);
    expect(await liveKeys(watchBucket, ">")).toEqual([]);
    expect(idsOf(await watchlist.due(Date.now()))).toEqual(["asg_six", "end.run_six"]);
    await watchlist.release("asg_six");
    await watchlist.unwatchRunEnd("run_six", (await assignmentsBucket.get("w.end.run_six"))!.revision);
    expect(await watchlist.due(Date.now())).toEqual([]);
  });

  it("moves the watches the other layout wrote to its own place, in either direction", async () => {
    const five = await watchlistOn(nc, 5);
    const six = await watchlistOn(nc, 6);
    await five.watch("asg_moved", 7);
    await five.watchRunEnd("run_moved", 8);
    expect(idsOf(await six.due(Date.now()))).toEqual(["asg_moved", "end.run_moved"]);
    expect(await liveKeys(assignmentsBucket, "w.>")).toEqual(["w.asg_moved", "w.end.run_moved"]);
    expect(await liveKeys(watchBucket, ">")).toEqual([]);
    expect((await assignmentsBucket.get("w.asg_moved"))?.value).toEqual({ assignment_id: "asg_moved", due_at: 7 });
    // And back, for a cluster returning to layout 5.
    expect(idsOf(await five.due(Date.now()))).toEqual(["asg_moved", "end.run_moved"]);
    expect(await liveKeys(watchBucket, ">")).toEqual(["asg_moved", "end.run_moved"]);
    expect(await liveKeys(assignmentsBucket, "w.>")).toEqual([]);
    await five.release("asg_moved");
    await five.unwatchRunEnd("run_moved", (await watchBucket.get("end.run_moved"))!.revision);
  });

  it("moves every due watch at once and the others a hundred a listing, counting all of them as watched meanwhile", async () => {
    const five = await watchlistOn(nc, 5);
    const six = await watchlistOn(nc, 6);
    const later = Date.now() + 60_000;
    const ids = Array.from({ length: 103 }, (_, i) => `asg_ahead_${i}`);
    for (const id of ids) await five.watch(id, later);
    await five.watch("asg_due_now", 0);
    expect(idsOf(await six.due(Date.now()))).toEqual(["asg_due_now"]);
    expect(await liveKeys(watchBucket, ">")).toHaveLength(3);
    expect(await liveKeys(assignmentsBucket, "w.>")).toHaveLength(101);
    expect((await six.watchedIds()).sort()).toEqual([...ids, "asg_due_now"].sort());
    // The next listing takes the rest.
    expect(await liveKeys(watchBucket, ">")).toEqual([]);
    for (const id of [...ids, "asg_due_now"]) await six.release(id);
  });

  it("keeps the watch of its own place when both places watch a key: written there, it is the later one", async () => {
    const five = await watchlistOn(nc, 5);
    const six = await watchlistOn(nc, 6);
    await five.watch("asg_both", 1);
    await six.watch("asg_both", 99);
    expect((await six.due(Date.now() + 1_000)).map(({ entry }) => entry)).toEqual([{ assignment_id: "asg_both", due_at: 99 }]);
    expect(await liveKeys(watchBucket, ">")).toEqual([]);
    await six.release("asg_both");
  });
});
