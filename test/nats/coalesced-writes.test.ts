import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type Msg, type NatsConnection } from "@nats-io/transport-node";
import { coalesceWrites } from "../../src/nats/coalesced-writes.js";
import { startTestNats, type TestNats } from "../helpers/nats.js";

/** Counts the frames the connection hands its transport (each one a socket write). */
function countWrites(nc: NatsConnection): () => number {
  const protocol = (nc as unknown as { protocol: { transport: { send(frame: Uint8Array): void } } }).protocol;
  const transport = protocol.transport;
  const send = transport.send.bind(transport);
  let writes = 0;
  transport.send = (frame: Uint8Array) => {
    writes++;
    send(frame);
  };
  return () => writes;
}

/** Publishes `n` messages, each from its own microtask, as continuations of many handlers do. */
async function publishFromMicrotasks(nc: NatsConnection, subject: string, n: number): Promise<void> {
  await Promise.all(
    Array.from({ length: n }, async (_, i) => {
      for (let hop = 0; hop < i % 4; hop++) await Promise.resolve();
      nc.publish(subject, String(i));
    }),
  );
}

describe("coalesceWrites: one socket write per turn of the event loop", () => {
  let nats: TestNats;
  let reader: NatsConnection;
  const received: string[] = [];

  beforeAll(async () => {
    nats = await startTestNats();
    reader = await connect({ servers: nats.url });
    reader.subscribe("coalesce.>", {
      callback: (_err, m: Msg) => {
        received.push(m.string());
      },
    });
    await reader.flush();
  });

  afterAll(async () => {
    await reader?.close();
    await nats?.stop();
  });

  const delivered = async (n: number) => {
    for (let i = 0; i < 100 && received.length < n; i++) await new Promise((r) => setTimeout(r, 20));
    return received.length;
  };

  it("sends what many microtasks of one turn publish in one write, and every message arrives", async () => {
    const plain = await connect({ servers: nats.url });
    const coalesced = await connect({ servers: nats.url });
    expect(coalesceWrites(coalesced)).toBe(true);
    expect(coalesceWrites(coalesced)).toBe(true); // twice changes nothing
    const plainWrites = countWrites(plain);
    const coalescedWrites = countWrites(coalesced);

    received.length = 0;
    await publishFromMicrotasks(plain, "coalesce.plain", 40);
    await publishFromMicrotasks(coalesced, "coalesce.coalesced", 40);
    await Promise.all([plain.flush(), coalesced.flush()]);
    expect(await delivered(80)).toBe(80);
    // Without it, each microtask hop that publishes after a flush starts another write.
    expect(plainWrites()).toBeGreaterThan(2);
    // With it: the 40 publishes in one write, the flush's PING in the next turn's.
    expect(coalescedWrites()).toBeLessThanOrEqual(2);
    await Promise.all([plain.close(), coalesced.close()]);
  });

  it("sends a last publish before close()", async () => {
    const nc = await connect({ servers: nats.url });
    coalesceWrites(nc);
    received.length = 0;
    nc.publish("coalesce.last", "bye");
    await nc.close();
    expect(await delivered(1)).toBe(1);
    expect(received).toEqual(["bye"]);
  });

  it("keeps working across a server restart", async () => {
    const nc = await connect({ servers: nats.url, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
    coalesceWrites(nc);
    await nats.restart();
    // The reader reconnects too; wait until a round trip goes through both.
    for (let i = 0; i < 100; i++) {
      received.length = 0;
      nc.publish("coalesce.after", "again");
      const ok = await nc.flush().then(
        () => true,
        () => false,
      );
      if (ok && (await delivered(1)) === 1) break;
    }
    expect(received).toEqual(["again"]);
    await nc.close();
  });
});
