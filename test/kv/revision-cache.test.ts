import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { Kvm } from "@nats-io/kv";
import { z } from "zod";
import { bucketStores } from "../../src/kv/buckets.js";
import type { VersionedStore } from "../../src/kv/versioned-store.js";
import { RevisionCache } from "../../src/kv/revision-cache.js";
import { startTestNats, type TestNats } from "../helpers/nats.js";

const Value = z.strictObject({ n: z.number() });
type Value = z.infer<typeof Value>;

/**
 * `VersionedStore.recent` across two processes' stores of one bucket (two connections): what a store
 * remembers can be stale, and it only ever starts a compare-and-set that then decides on the truth.
 */
describe("a store's revision cache", () => {
  let nats: TestNats;
  let conns: NatsConnection[];
  let mine: VersionedStore<Value>;
  let theirs: VersionedStore<Value>;

  beforeAll(async () => {
    nats = await startTestNats();
    conns = await Promise.all([connect({ servers: nats.url }), connect({ servers: nats.url })]);
    await new Kvm(conns[0]!).create("cache_test", { history: 1 });
    mine = (await (await bucketStores(conns[0]!))("cache_test", Value)).withRevisionCache(2);
    theirs = await (await bucketStores(conns[1]!))("cache_test", Value);
  });
  afterAll(async () => {
    for (const nc of conns ?? []) await nc.close();
    await nats?.stop();
  });

  it("serves what this store wrote from memory, and a fresh read when it has nothing", async () => {
    const created = await mine.create("a", { n: 1 });
    expect(created.created).toBe(true);
    expect(await mine.recent("a")).toEqual({ value: { n: 1 }, revision: created.created && created.revision, cached: true });
    await theirs.put("b", { n: 2 });
    expect(await mine.recent("b")).toMatchObject({ value: { n: 2 }, cached: false });
    expect(await mine.recent("missing")).toBeNull();
  });

  it("may be stale after another process wrote; a compare-and-set started from it decides on the current value", async () => {
    await mine.mutate("a", () => ({ write: { n: 10 }, result: undefined }));
    await theirs.mutate("a", (cur) => ({ write: { n: cur.n + 1 }, result: undefined }));
    const stale = await mine.recent("a");
    expect(stale).toMatchObject({ value: { n: 10 }, cached: true });
    const res = await mine.mutate("a", (cur) => ({ write: { n: cur.n * 2 }, result: cur.n }), stale!);
    // Decided on 11 (theirs), not on the remembered 10.
    expect(res).toMatchObject({ result: 11, value: { n: 22 }, written: true });
    expect(await mine.recent("a")).toMatchObject({ value: { n: 22 }, cached: true });
    // A decision not to write taken on a stale value is confirmed on a fresh read, too.
    await theirs.mutate("a", () => ({ write: { n: 0 }, result: undefined }));
    const seen = await mine.mutate("a", (cur) => ({ result: cur.n }), (await mine.recent("a"))!);
    expect(seen?.result).toBe(0);
  });

  it("forgets a key erased or found gone, and the least recently used key past its capacity", async () => {
    await mine.put("c", { n: 3 });
    await mine.erase("c");
    expect(await mine.recent("c")).toBeNull();
    await mine.put("d", { n: 4 });
    await theirs.erase("d");
    expect(await mine.get("d")).toBeNull();
    expect(await mine.recent("d")).toBeNull();

    const cache = new RevisionCache<Value>(2);
    cache.store("x", { value: { n: 1 }, revision: 5 });
    cache.store("x", { value: { n: 0 }, revision: 4 });
    expect(cache.get("x")?.revision).toBe(5);
    cache.store("y", { value: { n: 2 }, revision: 6 });
    cache.store("z", { value: { n: 3 }, revision: 7 });
    expect(cache.get("x")).toBeUndefined();
    expect(cache.get("z")?.revision).toBe(7);
    // y was used before z: y goes; a stale revision kept nothing and moved nothing.
    cache.store("z", { value: { n: 0 }, revision: 3 });
    cache.store("w", { value: { n: 4 }, revision: 8 });
    expect(cache.get("y")).toBeUndefined();
    expect(cache.get("z")).toEqual({ value: { n: 3 }, revision: 7 });
    expect(cache.get("w")?.revision).toBe(8);
  });

  it("keeps the latest keys through many evictions, forgetting the ones it was told to", () => {
    const cache = new RevisionCache<Value>(100);
    for (let i = 0; i < 10_000; i++) cache.store(`k${i}`, { value: { n: i }, revision: i + 1 });
    cache.forget("k9999");
    expect(cache.get("k9899")).toBeUndefined();
    expect(cache.get("k9999")).toBeUndefined();
    for (let i = 9_900; i < 9_999; i++) expect(cache.get(`k${i}`)?.revision).toBe(i + 1);
  });
});
