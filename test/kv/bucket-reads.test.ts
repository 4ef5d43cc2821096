import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, nkeys, type NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { z } from "zod";
import { bucketStores } from "../../src/kv/buckets.js";
import { ConfigStore } from "../../src/config/config-store.js";
import { ExecutorStore } from "../../src/executors/executor-store.js";
import { ensureStreams, loadDefinitions } from "../../src/streams/index.js";
import { startNatsCluster, type NatsCluster } from "../../src/nats/nats-cluster.js";
import { startTestNats, type TestNats } from "../helpers/nats.js";
import { seedSession } from "../helpers/execution-gateway.js";
import { until } from "../helpers/until.js";

const Value = z.strictObject({ n: z.number() });

/**
 * Which JetStream API a store's read goes to, seen on the wire by a second connection: a direct get
 * (any replica may answer) or a message get (answered by the stream leader).
 */
async function readPathOf(url: string, replicas: number): Promise<{ apis: string[]; value: unknown }> {
  return readPath(url, async (nc) => {
    await new Kvm(nc).create(`reads_r${replicas}`, { history: 1, replicas });
    const store = await (await bucketStores(nc))(`reads_r${replicas}`, Value);
    await store.put("k", { n: 7 });
    return async () => (await store.get("k"))?.value;
  });
}

/** The read APIs `read` (made ready by `prepare`, unobserved) sends. */
async function readPath(url: string, prepare: (nc: NatsConnection) => Promise<() => Promise<unknown>>): Promise<{ apis: string[]; value: unknown }> {
  // Both on the same node: a spy on another node would see the read only once its interest crossed the routes.
  const nc = await connect({ servers: url.split(","), noRandomize: true });
  const spy = await connect({ servers: url.split(","), noRandomize: true });
  try {
    const read = await prepare(nc);
    const apis: string[] = [];
    // Only the two read APIs are of interest (a put or a stream info also passes under $JS.API).
    spy.subscribe("$JS.API.>", {
      callback: (_err, m) => {
        if (m.subject.startsWith("$JS.API.DIRECT.GET.")) apis.push("direct get");
        else if (m.subject.startsWith("$JS.API.STREAM.MSG.GET.")) apis.push("leader get");
      },
    });
    await spy.flush();
    const value = await read();
    await until("the spy to see the read", () => (apis.length > 0 ? true : undefined), 5_000);
    return { apis, value };
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

  it("of the configuration and the executor registry on a replicated bucket go through the stream leader too", async () => {
    const declared = loadDefinitions().filter((d) => d.kind === "kv" && (d.bucket === "tg_config" || d.bucket === "tg_executors"));
    const { apis, value } = await readPath(cluster.url, async (nc) => {
      await ensureStreams(await jetstreamManager(nc), declared, { replicas: 3 });
      const writer = await ConfigStore.open(nc);
      const session = await seedSession(writer, { scope: "s1", agent: "bot", tools: [{ name: "tasks.read", binding_id: "b1" }] });
      await (await ExecutorStore.open(nc, writer)).register({ executor_id: "e1", scope: "s1", nkeys: [nkeys.createUser().getPublicKey()], bindings: ["b1"] });
      // Fresh stores, as another gateway would read what this one wrote (the writer caches its own).
      return async () => [
        (await (await ConfigStore.open(nc)).resolveTool(session, "tasks.read")).binding.binding_id,
        (await (await ExecutorStore.open(nc, writer)).read("e1"))?.scope,
      ];
    });
    expect(value).toEqual(["b1", "s1"]);
    expect(apis).not.toContain("direct get");
    expect(apis).toContain("leader get");
  }, 30_000);
});
