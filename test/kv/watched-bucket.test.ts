import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { Kvm, type KV } from "@nats-io/kv";
import { z } from "zod";
import { VersionedStore } from "../../src/kv/versioned-store.js";
import { WatchedBucket } from "../../src/kv/watched-bucket.js";
import { startTestNats, type TestNats } from "../helpers/nats.js";
import { until } from "../helpers/until.js";

const Value = z.strictObject({ n: z.number() });
type Value = z.infer<typeof Value>;

/** A store of `Value`s on a new bucket, on `nc`. */
async function storeOn(nc: NatsConnection, bucket: string): Promise<VersionedStore<Value>> {
  const kv = await new Kvm(nc).create(bucket, { history: 5 });
  return new VersionedStore(kv, Value, { bucket, nc, js: jetstream(nc), jsm: await jetstreamManager(nc) });
}

/** Waits until `view` holds `key` at `n` (undefined: holds no value). */
const holds = (view: WatchedBucket<Value>, key: string, n: number | undefined) =>
  until(`the view to hold ${key} = ${n}`, async () => ((await view.get(key))?.value.n === n ? true : undefined), 5_000);

/** The view of one connection, the writes of another (another gateway process, as far as NATS can tell). */
describe("WatchedBucket: a bucket as this process's view", () => {
  let nats: TestNats;
  let own: NatsConnection;
  let other: NatsConnection;
  const views: WatchedBucket<unknown>[] = [];

  beforeAll(async () => {
    nats = await startTestNats();
    [own, other] = await Promise.all([connect({ servers: nats.url }), connect({ servers: nats.url })]);
  });
  afterAll(async () => {
    for (const v of views) v.stop();
    await own?.close();
    await other?.close();
    await nats?.stop();
  });

  const viewOf = async (bucket: string) => {
    const view = await (await storeOn(own, bucket)).view(own);
    views.push(view);
    return view;
  };

  it("holds the bucket's values once ready, removed keys left out; an empty bucket is ready too", async () => {
    const writer = await storeOn(other, "view_initial");
    await writer.put("a", { n: 1 });
    await writer.put("b", { n: 2 });
    await writer.put("a", { n: 3 });
    await writer.removeAt("b", (await writer.get("b"))!.revision);
    const view = await viewOf("view_initial");
    await view.ready;
    expect((await view.get("a"))?.value).toEqual({ n: 3 });
    expect(await view.get("b")).toBeUndefined();

    // Nothing is delivered on an empty bucket, so nothing to flag the end of the values: ready all the same.
    await storeOn(other, "view_empty");
    const empty = await viewOf("view_empty");
    await empty.ready;
    expect(await empty.get("a")).toBeUndefined();
  });

  it("follows another connection's writes, deletes and purges", async () => {
    const writer = await storeOn(other, "view_follow");
    const view = await viewOf("view_follow");
    await view.ready;
    await writer.put("k", { n: 1 });
    await holds(view, "k", 1);
    await writer.put("k", { n: 2 });
    await holds(view, "k", 2);
    await writer.removeAt("k", (await writer.get("k"))!.revision);
    await holds(view, "k", undefined);
    await writer.put("k", { n: 3 });
    await holds(view, "k", 3);
    await (await new Kvm(other).open("view_follow")).purge("k");
    await holds(view, "k", undefined);
  });

  it("has this process's own writes at once, never replaced by an older revision delivered after them", async () => {
    const writer = await storeOn(other, "view_own");
    const mine = await storeOn(own, "view_own");
    const view = await viewOf("view_own");
    await view.ready;
    for (let i = 0; i < 20; i++) {
      // Another writer's revision, then this process's: whichever order the watch delivers them in, the newer stays.
      await writer.put("k", { n: 2 * i });
      const revision = await mine.put("k", { n: 2 * i + 1 });
      view.wrote("k", revision, { n: 2 * i + 1 });
      expect(await view.get("k")).toEqual({ value: { n: 2 * i + 1 }, revision });
      await writer.put("mark", { n: i });
      await holds(view, "mark", i);
      expect((await view.get("k"))?.value).toEqual({ n: 2 * i + 1 });
    }

    // Removed by this process: gone at once, though the watch delivers the removed value's revision (or already did).
    const last = (await mine.get("k"))!;
    await mine.removeAt("k", last.revision);
    view.removed("k", last.revision);
    expect(await view.get("k")).toBeUndefined();
    await writer.put("mark", { n: 100 });
    await holds(view, "mark", 100);
    expect(await view.get("k")).toBeUndefined();
    // A value written after the removal is the view's again.
    await writer.put("k", { n: 7 });
    await holds(view, "k", 7);
  });

  it("decodes each revision once, at its first read", async () => {
    const json = (n: number) => new TextEncoder().encode(JSON.stringify({ n }));
    const kv: KV = await new Kvm(own).create("view_decode");
    await kv.put("k", json(1));
    const decoded: number[] = [];
    const view = await WatchedBucket.start(own, kv, (data) => {
      const value = Value.parse(JSON.parse(new TextDecoder().decode(data)));
      decoded.push(value.n);
      return value;
    });
    views.push(view);
    await view.ready;
    expect(decoded).toEqual([]);
    // k's first revision is replaced before anyone reads it: never decoded.
    await kv.put("k", json(2));
    await kv.put("j", json(3));
    await until("the view to hold j", async () => ((await view.get("j"))?.value.n === 3 ? true : undefined), 5_000);
    for (const _ of [0, 1, 2]) expect((await view.get("k"))?.value).toEqual({ n: 2 });
    for (const _ of [0, 1, 2]) expect((await view.get("j"))?.value).toEqual({ n: 3 });
    expect(decoded).toEqual([3, 2]);
  });
});

describe("WatchedBucket when its watch is cut", () => {
  let nats: TestNats;
  const conns: NatsConnection[] = [];
  let view: WatchedBucket<Value> | undefined;

  beforeAll(async () => {
    nats = await startTestNats();
  });
  afterAll(async () => {
    view?.stop();
    for (const nc of conns) await nc.close();
    await nats?.stop();
  });

  it("answers after its connection is back only once it has the changes made meanwhile", async () => {
    // The view's connection comes back seconds after the writer's: the change falls between them.
    const viewing = await connect({ servers: nats.url, reconnectTimeWait: 8_000, maxReconnectAttempts: -1 });
    const writing = await connect({ servers: nats.url, reconnectTimeWait: 50, maxReconnectAttempts: -1 });
    conns.push(viewing, writing);
    const writer = await storeOn(writing, "view_reconnect");
    await writer.put("k", { n: 1 });
    view = await (await storeOn(viewing, "view_reconnect")).view(viewing);
    await view.ready;
    expect((await view.get("k"))?.value).toEqual({ n: 1 });

    const reconnect = (nc: NatsConnection) =>
      (async () => {
        for await (const s of nc.status()) if (s.type === "reconnect") return true;
      })();
    let viewBack = false;
    const viewReconnected = reconnect(viewing).then(() => (viewBack = true));
    const writerReconnected = reconnect(writing);
    await nats.restart();
    await writerReconnected;
    // JetStream may take a moment after the server is back: the write is retried until it is stored.
    await until("the write after the restart", async () => (await writer.put("k", { n: 2 }).catch(() => undefined)) ?? undefined, 10_000, 100);
    expect(viewBack).toBe(false);
    await viewReconnected;
    expect((await view.get("k"))?.value).toEqual({ n: 2 });
  });

  it("watches again when its consumer is lost while the connection stays up, well before the client would notice", async () => {
    const viewing = await connect({ servers: nats.url });
    const writing = await connect({ servers: nats.url });
    conns.push(viewing, writing);
    const writer = await storeOn(writing, "view_lost");
    await writer.put("k", { n: 1 });
    const lost = await (await storeOn(viewing, "view_lost")).view(viewing);
    await lost.ready;
    // As when the consumer's node is gone: the client would notice after two missed idle heartbeats (60 s and more).
    const jsm = await jetstreamManager(writing);
    for await (const consumer of jsm.consumers.list("KV_view_lost")) await jsm.consumers.delete("KV_view_lost", consumer.name);
    await writer.put("k", { n: 2 });
    try {
      await until("the view to hold k = 2", async () => ((await lost.get("k"))?.value.n === 2 ? true : undefined), 15_000);
    } finally {
      lost.stop();
    }
  });
});
