import { readdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jetstream, type Consumer } from "@nats-io/jetstream";
import { CandidateAnchor } from "../../../src/execution/dispatch/candidate-anchor.js";
import { CandidateQueue } from "../../../src/execution/dispatch/candidate-queue.js";
import { createLogger } from "../../../src/log/logger.js";
import { compareVersions, serverFacts } from "../../../src/nats/server-version.js";
import { candidateConsumer, STREAMS } from "../../../src/streams/names.js";
import { subjects } from "../../../src/wire/subjects.js";
import { storedOn } from "../../helpers/nats.js";
import { until } from "../../helpers/until.js";
import { candidate, startCandidateStream, type CandidateStream } from "./candidate-stream.js";

const SCOPE = "anchored";

describe("the candidates' anchor", () => {
  let stream: CandidateStream, queue: CandidateQueue, consumer: Consumer;
  let next = 0;
  beforeAll(async () => {
    stream = await startCandidateStream();
    queue = new CandidateQueue(stream.nc, stream.jsm, { replicas: 1, ackWaitMs: 30_000 });
    await queue.ensureScopeConsumer(SCOPE);
    consumer = await jetstream(stream.nc).consumers.get(STREAMS.candidates, candidateConsumer(SCOPE));
  });
  afterAll(() => stream?.close());

  /** The stream's block files, as nats-server keeps them in its store dir. */
  const blockFiles = (): string[] => {
    const storeDir = stream.nats.process?.storeDir;
    if (!storeDir) throw new Error("this test reads a local nats-server's store dir: run with TOOLGATE_TEST_DOCKER=0");
    const msgs = readdirSync(storeDir, { recursive: true, encoding: "utf8" }).find((p) => p.endsWith(join("streams", STREAMS.candidates, "msgs")));
    if (!msgs) throw new Error(`no ${STREAMS.candidates} message blocks under ${storeDir}`);
    return readdirSync(join(storeDir, msgs))
      .filter((f) => f.endsWith(".blk"))
      .sort();
  };
  /** One candidate offered, taken by an executor and acknowledged: the queue is empty again, anchors aside. */
  const offerAndTake = async () => {
    await queue.publish(SCOPE, candidate(++next));
    const batch = await consumer.fetch({ max_messages: 1, expires: 2_000 });
    for await (const m of batch) expect(await m.ackAck()).toBe(true);
  };
  const anchors = () => storedOn(stream.jsm, STREAMS.candidates, subjects.candidateAnchor);

  it("keeps the work queue's block while every candidate is taken; without it the server replaces the block each time", async () => {
    // Without an anchor, every candidate acknowledged empties the queue: from 2.10 on, the block file
    // goes and a new one comes (2.9 closes the emptied block and opens it again for the next one).
    const before = blockFiles();
    for (let i = 0; i < 3; i++) await offerAndTake();
    if (compareVersions(serverFacts(stream.nc).version, "2.10.0") >= 0) expect(blockFiles()).not.toEqual(before);

    await queue.anchor();
    const anchored = blockFiles();
    for (let i = 0; i < 10; i++) await offerAndTake();
    expect(blockFiles()).toEqual(anchored);
    expect(await anchors()).toBe(1);
  });

  it("is never delivered to a scope's executors", async () => {
    await queue.anchor();
    await queue.publish(SCOPE, candidate(++next));
    const seen: string[] = [];
    for await (const m of await consumer.fetch({ max_messages: 10, expires: 1_000 })) {
      seen.push(m.subject);
      m.ack();
    }
    expect(seen).toEqual([subjects.candidate(SCOPE, "tasks", `asg-${next}`)]);
  });

  it("leaves one anchor, the newest, however many gateways renew it at once", async () => {
    const other = new CandidateQueue(stream.nc, stream.jsm, { replicas: 1, ackWaitMs: 30_000 });
    const seqs = await Promise.all([queue.anchor(), other.anchor(), queue.anchor(), other.anchor()]);
    expect(await anchors()).toBe(1);
    const left = await stream.jsm.streams.getMessage(STREAMS.candidates, { last_by_subj: subjects.candidateAnchor });
    expect(left?.seq).toBe(Math.max(...seqs));
  });

  it("is renewed only once this gateway offered candidates since the last one", async () => {
    const anchor = new CandidateAnchor(queue, createLogger({ level: "silent" }), 50);
    const newest = async () => (await stream.jsm.streams.getMessage(STREAMS.candidates, { last_by_subj: subjects.candidateAnchor }))?.seq;
    const before = await newest();
    anchor.start();
    try {
      const first = await until("the first anchor", async () => ((await newest()) !== before ? newest() : undefined));
      // Several ticks with nothing offered: the anchor stays where it is.
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(await newest()).toBe(first);
      await offerAndTake();
      await until("a renewed anchor", async () => ((await newest()) !== first ? true : undefined));
      // The renewal deletes the anchors before it right after storing itself: one is left.
      await until("the older anchor deleted", async () => ((await anchors()) === 1 ? true : undefined));
      expect(await newest()).not.toBe(first);
    } finally {
      await anchor.stop();
    }
  });
});
