import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { Kvm } from "@nats-io/kv";
import { z } from "zod";
import { bucketStores } from "../../src/kv/buckets.js";
import { startNatsCluster, type NatsCluster } from "../../src/nats/nats-cluster.js";

const Counter = z.strictObject({ n: z.number(), by: z.array(z.number()) });
const WRITERS = 40;

/**
 * Many compare-and-set writers on one key of a three-replica bucket, as when a model's parallel tool
 * calls are appended to one run. A server that refuses a write while another one to the same key is
 * still in raft answers "wrong last sequence" with its replicated code (10164 on 2.12+), which must
 * read as a lost race (decide again) and never as a failure; and no write may be lost.
 */
describe("compare-and-set on a replicated bucket", () => {
  let cluster: NatsCluster;
  let nc: NatsConnection;

  beforeAll(async () => {
    cluster = await startNatsCluster();
    nc = await connect({ servers: [...cluster.urls] });
  }, 60_000);
  afterAll(async () => {
    await nc?.close();
    await cluster?.stop();
  });

  it(`${WRITERS} concurrent writers on one key of an R3 bucket: every write lands once`, async () => {
    await new Kvm(nc).create("cas_r3", { history: 1, replicas: 3 });
    const store = await (await bucketStores(nc))("cas_r3", Counter);
    await store.create("run", { n: 0, by: [] });
    const results = await Promise.allSettled(
      Array.from({ length: WRITERS }, (_, i) => store.mutate("run", (c) => ({ write: { n: c.n + 1, by: [...c.by, i] }, result: i }))),
    );
    expect(results.filter((r) => r.status === "rejected").map((r) => String((r as PromiseRejectedResult).reason))).toEqual([]);
    const final = await store.get("run");
    expect(final?.value.n).toBe(WRITERS);
    expect([...(final?.value.by ?? [])].sort((a, b) => a - b)).toEqual(Array.from({ length: WRITERS }, (_, i) => i));
  }, 60_000);

  it("create of an existing key on an R3 bucket answers with what is there, from concurrent creators", async () => {
    await new Kvm(nc).create("create_r3", { history: 1, replicas: 3 });
    const store = await (await bucketStores(nc))("create_r3", Counter);
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => store.create("k", { n: i, by: [] })));
    const created = results.filter((r) => r.created);
    expect(created).toHaveLength(1);
    const winner = (await store.get("k"))!.value;
    for (const r of results) if (!r.created) expect(r.existing.value).toEqual(winner);
  }, 60_000);
});
