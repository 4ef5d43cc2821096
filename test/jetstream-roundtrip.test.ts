import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { AckPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { startTestNats, type TestNats } from "./helpers/nats.js";

describe("test NATS helper", () => {
  let nats: TestNats;
  let nc: NatsConnection;

  beforeAll(async () => {
    nats = await startTestNats();
    nc = await connect({ servers: nats.url });
  });
  afterAll(async () => {
    await nc?.close();
    await nats?.stop();
  });

  it("runs its own server, never the machine's :4222", () => {
    expect(nats.url).toMatch(/^nats:\/\/127\.0\.0\.1:\d+$/);
    expect(nats.url).not.toMatch(/:4222$/);
  });

  it("publishes to a JetStream stream and reads the messages back in order", async () => {
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: "HELPER_PROBE", subjects: ["probe.>"] });
    const js = jetstream(nc);
    const acks = [];
    for (let i = 0; i < 5; i++) acks.push(await js.publish(`probe.${i}`, `message-${i}`, { msgID: `m-${i}` }));
    expect(acks.map((a) => a.seq)).toEqual([1, 2, 3, 4, 5]);
    const again = await js.publish("probe.0", "message-0", { msgID: "m-0" });
    expect(again.duplicate).toBe(true);

    await jsm.consumers.add("HELPER_PROBE", { durable_name: "reader", ack_policy: AckPolicy.Explicit });
    const consumer = await js.consumers.get("HELPER_PROBE", "reader");
    const batch = await consumer.fetch({ max_messages: 5, expires: 2_000 });
    const seen: string[] = [];
    for await (const m of batch) {
      seen.push(m.string());
      m.ack();
      if (seen.length === 5) break;
    }
    expect(seen).toEqual(["message-0", "message-1", "message-2", "message-3", "message-4"]);
  });

  it("keeps stream data across a server restart on the same store dir", async () => {
    await nc.close();
    await nats.restart();
    nc = await connect({ servers: nats.url });
    const jsm = await jetstreamManager(nc);
    const info = await jsm.streams.info("HELPER_PROBE");
    expect(info.state.messages).toBe(5);
  });
});
