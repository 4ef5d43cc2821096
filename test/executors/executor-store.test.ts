import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { ConfigStore } from "../../src/config/config-store.js";
import { ExecutorStore } from "../../src/executors/executor-store.js";
import { ensureStreams, loadDefinitions } from "../../src/streams/index.js";
import { startTestNats, type TestNats } from "../helpers/nats.js";
import { until } from "../helpers/until.js";

/**
 * Two stores on two connections stand for two gateway replicas: a change made through one is in its
 * own view at once, in the other's once its watch delivered it, and what either reads of the bucket next.
 */
describe("executor store", () => {
  let nats: TestNats;
  const conns: NatsConnection[] = [];
  let replicas: ExecutorStore[];

  beforeAll(async () => {
    nats = await startTestNats();
    for (const _ of [0, 1]) conns.push(await connect({ servers: nats.url }));
    await ensureStreams(await jetstreamManager(conns[0]!), loadDefinitions(), { replicas: 1 });
    const config = await ConfigStore.open(conns[0]!);
    for (const id of ["es-a", "es-b"]) await config.putBinding({ binding_id: id, executor_scope: "es", tool_kind: "read" });
    replicas = await Promise.all(conns.map(async (nc) => ExecutorStore.open(nc, await ConfigStore.open(nc))));
    for (const r of replicas) await r.watch();
  });

  afterAll(async () => {
    for (const r of replicas ?? []) r.stop();
    for (const nc of conns) await nc.close();
    await nats?.stop();
  });

  /** Waits until `store`'s view has `executorId` with `bindings` (null: not registered). */
  const viewed = (store: ExecutorStore, executorId: string, bindings: string[] | null) =>
    until(
      `the view to have ${executorId} at ${JSON.stringify(bindings)}`,
      async () => {
        const executor = await store.get(executorId);
        return JSON.stringify(executor ? executor.bindings : null) === JSON.stringify(bindings) ? true : undefined;
      },
      5_000,
    );

  it("has a change in the view of the replica that made it at once, in the other's once delivered, in the bucket for both", async () => {
    const [one, two] = replicas as [ExecutorStore, ExecutorStore];
    await one.register({ executor_id: "es-1", scope: "es", bindings: ["es-a", "es-b"], nkeys: [] });
    expect((await one.get("es-1"))?.bindings).toEqual(["es-a", "es-b"]);
    expect((await two.read("es-1"))?.bindings).toEqual(["es-a", "es-b"]);
    await viewed(two, "es-1", ["es-a", "es-b"]);

    await one.setBindings("es-1", ["es-a"]);
    expect((await one.get("es-1"))?.bindings).toEqual(["es-a"]);
    expect((await two.read("es-1"))?.bindings).toEqual(["es-a"]);
    await viewed(two, "es-1", ["es-a"]);

    await one.remove("es-1");
    expect(await one.get("es-1")).toBeNull();
    expect(await two.read("es-1")).toBeNull();
    await viewed(two, "es-1", null);

    // Registered again after its removal, through the other replica: the new registration, not the one seen before.
    await two.register({ executor_id: "es-1", scope: "es", bindings: ["es-b"], nkeys: [] });
    expect((await two.get("es-1"))?.bindings).toEqual(["es-b"]);
    await viewed(one, "es-1", ["es-b"]);
  });

  it("answers get only from a started view", async () => {
    const unwatched = await ExecutorStore.open(conns[0]!, await ConfigStore.open(conns[0]!));
    await expect(unwatched.get("es-1")).rejects.toThrow(/not started/);
    expect((await unwatched.read("es-1"))?.bindings).toEqual(["es-b"]);
  });
});
