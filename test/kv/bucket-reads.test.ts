import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect } from "@nats-io/transport-node";
import { Kvm } from "@nats-io/kv";
import { z } from "zod";
import { bucketStores } from "../../src/kv/buckets.js";
import { startNatsCluster, type NatsCluster } from "../../src/nats/nats-cluster.js";
import { startTestNats, type TestNats } from "../helpers/nats.js";
import { until } from "../helpers/until.js";

const Value = z.strictObject({ n: z.number() });

/**
 * Which JetStream API a store's read goes to, seen on the wire by a second connection: a direct get
 * (any replica may answer) or a message get (answered by the stream leader).
 */
async function readPathOf(url: string, replicas: number): Promise<{ apis: string[]; value: unknown }> {
  const nc = await connect({ servers: url.split(",") });
  const spy = await connect({ servers: url.split(",") });
  try {
    await new Kvm(nc).create(`reads_r${replicas}`, { history: 1, replicas });
    const apis: string[] = [];
    // Only the two read APIs are of interest (a put or a stream info also passes under $JS.API).
    spy.subscribe("$JS.API.>", {
      callback: (_err, m) => {
        if (m.subject.startsWith("$JS.API.DIRECT.GET.")) apis.push("direct get");
        else if (m.subject.startsWith("$JS.API.STREAM.MSG.GET.")) apis.push("leader get");
      },
    });
    await spy.flush();
    const store = await (await bucketStores(nc))(`reads_r${replicas}`, Value);
    await store.put("k", { n: 7 });
    const read = await store.get("k");
    await until("the spy to see the read", () => (apis.length > 0 ? true : undefined), 5_000);
    return { apis, value: read?.value };
  } finally {
    await spy.close();
    await nc.close();
  }
}

describe("bucket reads", () => {
  let nats: TestNats;
  let cluster: NatsCluster;

  beforeAll(async () => {
    [nats, cluster] = await Promise.all([startTestNats(), startNatsCluster()]);
  }, 60_000);
  afterAll(async () => {
    await Promise.all([nats?.stop(), cluster?.stop()]);
  });

  it("on a one-replica bucket are direct gets", async () => {
    const { apis, value } = await readPathOf(nats.url, 1);
    expect(value).toEqual({ n: 7 });
    expect(apis).toEqual(["direct get"]);
  });

  it("on a replicated bucket go through the stream leader (no follower answers with an old copy)", async () => {
    const { apis, value } = await readPathOf(cluster.url, 3);
    expect(value).toEqual({ n: 7 });
    expect(apis).toEqual(["leader get"]);
  }, 30_000);
});
