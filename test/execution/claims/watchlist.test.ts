import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { bucketStores } from "../../../src/kv/buckets.js";
import { WatchEntry } from "../../../src/execution/model/records.js";
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
    watchlist = new Watchlist(store);
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
