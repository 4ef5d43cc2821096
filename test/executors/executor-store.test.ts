import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { ConfigStore } from "../../src/config/config-store.js";
import { ExecutorStore } from "../../src/executors/executor-store.js";
import { ensureStreams, loadDefinitions } from "../../src/streams/index.js";
import { startTestNats, type TestNats } from "../helpers/nats.js";

/** Two stores on two connections stand for two gateway replicas: a change made through one is what the other reads next. */
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
  });

  afterAll(async () => {
    for (const nc of conns) await nc.close();
    await nats?.stop();
  });

  it("reads every change made on another replica at the next read, however often it read the executor before", async () => {
    const [one, two] = replicas as [ExecutorStore, ExecutorStore];
    await one.register({ executor_id: "es-1", scope: "es", bindings: ["es-a", "es-b"], nkeys: [] });
    for (const _ of [0, 1, 2]) expect((await two.get("es-1"))?.bindings).toEqual(["es-a", "es-b"]);

    await one.setBindings("es-1", ["es-a"]);
    expect((await two.get("es-1"))?.bindings).toEqual(["es-a"]);

    await one.remove("es-1");
    expect(await two.get("es-1")).toBeNull();

    // Registered again after its removal: the new registration, not the one read before.
    await one.register({ executor_id: "es-1", scope: "es", bindings: ["es-b"], nkeys: [] });
    expect((await two.get("es-1"))?.bindings).toEqual(["es-b"]);
  });
});
