import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NatsConnection } from "@nats-io/transport-node";
import { jetstream } from "@nats-io/jetstream";
import { CandidateQueue } from "../../../src/execution/dispatch/candidate-queue.js";
import { candidateConsumer, STREAMS } from "../../../src/streams/names.js";
import { candidate, startCandidateStream, type CandidateStream } from "./candidate-stream.js";

const SCOPE = "cq";

describe("withdrawing a candidate", () => {
  let stream: CandidateStream, nc: NatsConnection, queue: CandidateQueue;
  beforeAll(async () => {
    stream = await startCandidateStream();
    nc = stream.nc;
    queue = new CandidateQueue(jetstream(nc), stream.jsm, { replicas: 1, ackWaitMs: 30_000 });
  });
  afterAll(() => stream?.close());

  it("deletes a waiting one, and takes one already pulled and acknowledged (gone from the work queue) as done", async () => {
    const seqs = [await queue.publish(SCOPE, candidate(1)), await queue.publish(SCOPE, candidate(2)), await queue.publish(SCOPE, candidate(3))];
    // An executor takes the middle one: work-queue retention removes it on the acknowledgement.
    const consumer = await jetstream(nc).consumers.get(STREAMS.candidates, candidateConsumer(SCOPE));
    const batch = await consumer.fetch({ max_messages: 2, expires: 2_000 });
    for await (const m of batch) if (m.seq === seqs[1]) await m.ackAck();
    await expect(queue.waiting(SCOPE, seqs[1]!)).resolves.toBe(false);

    // The server answers "sequence not found" for a hole in the stream, not "no message found".
    await expect(queue.delete(seqs[1]!)).resolves.toBeUndefined();
    await queue.delete(seqs[0]!);
    await expect(queue.waiting(SCOPE, seqs[0]!)).resolves.toBe(false);
    await expect(queue.delete(seqs[0]!)).resolves.toBeUndefined();
    await expect(queue.waiting(SCOPE, seqs[2]!)).resolves.toBe(true);
  });
});
