import { afterEach, describe, expect, it } from "vitest";
import { AckPolicy, jetstream, jetstreamManager, RetentionPolicy } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { startNatsServer, type NatsServerProcess } from "../../src/nats/nats-server-process.js";
import { bridgeExecutorJetStreamApi, executorJetStreamMappings } from "../../src/security/jsapi-bridge.js";
import { candidateConsumer, STREAMS } from "../../src/streams/names.js";
import { EXECUTOR_JS_API_PREFIX, subjects } from "../../src/wire/subjects.js";

const SCOPE = "s1";

/** A server with one candidate waiting on the scope's consumer. */
async function serverWithCandidate(config?: string): Promise<{ server: NatsServerProcess; admin: NatsConnection }> {
  const server = await startNatsServer(config === undefined ? {} : { config });
  const admin = await connect({ servers: server.url });
  const jsm = await jetstreamManager(admin);
  await jsm.streams.add({ name: STREAMS.candidates, subjects: ["tg.cand.>"], retention: RetentionPolicy.Workqueue });
  await jsm.consumers.add(STREAMS.candidates, {
    durable_name: candidateConsumer(SCOPE),
    filter_subject: subjects.candidateFilter(SCOPE),
    ack_policy: AckPolicy.Explicit,
  });
  await jetstream(admin).publish(subjects.candidate(SCOPE, "b1", "asg-1"), "candidate");
  return { server, admin };
}

/** What an executor pulls through its own JetStream prefix, as the ToolRunner does (null: nobody answered in time). */
async function pullAsExecutor(url: string): Promise<string | null> {
  const nc = await connect({ servers: url });
  try {
    const consumer = await jetstream(nc, { apiPrefix: EXECUTOR_JS_API_PREFIX, timeout: 1_000 }).consumers.get(STREAMS.candidates, candidateConsumer(SCOPE));
    const m = await consumer.next({ expires: 1_000 });
    return m?.string() ?? null;
  } catch {
    return null;
  } finally {
    await nc.close();
  }
}

describe("the executors' JetStream prefix", () => {
  const started: Array<{ server: NatsServerProcess; admin: NatsConnection }> = [];
  afterEach(async () => {
    for (const { server, admin } of started.splice(0)) {
      await admin.close();
      await server.stop();
    }
  });

  it("reaches JetStream on a server configured with its mappings, with no gateway to forward it", async () => {
    const s = await serverWithCandidate(executorJetStreamMappings());
    started.push(s);
    expect(await pullAsExecutor(s.server.url)).toBe("candidate");
  });

  it("on a plain server, reaches JetStream only through a gateway's bridge", async () => {
    const s = await serverWithCandidate();
    started.push(s);
    expect(await pullAsExecutor(s.server.url)).toBeNull();
    const subs = bridgeExecutorJetStreamApi(s.admin);
    await s.admin.flush();
    expect(await pullAsExecutor(s.server.url)).toBe("candidate");
    for (const sub of subs) sub.unsubscribe();
  });
});
