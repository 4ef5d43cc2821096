import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NatsConnection } from "@nats-io/transport-node";
import { jetstream } from "@nats-io/jetstream";
import { CandidateQueue } from "../../../src/execution/dispatch/candidate-queue.js";
import { candidateConsumer, STREAMS } from "../../../src/streams/names.js";
import { candidate, startCandidateStream, type CandidateStream } from "./candidate-stream.js";

const SCOPE = "cq";

const of = (n: number) => ({ scope: SCOPE, binding_id: "tasks", assignment_id: `asg-${n}` });

describe("a candidate on its assignment's own subject", () => {
  let stream: CandidateStream, nc: NatsConnection, queue: CandidateQueue;
  beforeAll(async () => {
    stream = await startCandidateStream();
    nc = stream.nc;
    queue = new CandidateQueue(nc, stream.jsm, { replicas: 1, ackWaitMs: 30_000 });
  });
  afterAll(() => stream?.close());

  it("is found by its subject while it waits, and taken back by it; one pulled and acknowledged is gone", async () => {
    const seqs = [await queue.publish(SCOPE, candidate(1)), await queue.publish(SCOPE, candidate(2)), await queue.publish(SCOPE, candidate(3))];
    expect(await queue.find(of(2))).toEqual({ seq: seqs[1], candidate: candidate(2) });
    // An executor takes the middle one: work-queue retention removes it on the acknowledgement.
    const consumer = await jetstream(nc).consumers.get(STREAMS.candidates, candidateConsumer(SCOPE));
    const batch = await consumer.fetch({ max_messages: 2, expires: 2_000 });
    for await (const m of batch) if (m.seq === seqs[1]) await m.ackAck();
    await expect(queue.waiting(of(2), 0)).resolves.toBe(false);
    await expect(queue.find(of(2))).resolves.toBeNull();

    // Taking back what is gone is no error; a waiting one is purged from its subject.
    await expect(queue.takeBack(of(2))).resolves.toBeUndefined();
    await queue.takeBack(of(1));
    await expect(queue.waiting(of(1), 0)).resolves.toBe(false);
    await expect(queue.takeBack(of(1))).resolves.toBeUndefined();
    await expect(queue.waiting(of(3), 0)).resolves.toBe(true);
    // Only the generation asked for counts as waiting.
    await expect(queue.waiting(of(3), 1)).resolves.toBe(false);
  });

  it("takes back the candidate an earlier version named by sequence in the assignment", async () => {
    const seq = await queue.publish(SCOPE, candidate(4));
    await queue.takeBack({ ...of(99), candidate_seq: seq });
    await expect(stream.jsm.streams.getMessage(STREAMS.candidates, { seq })).resolves.toBeNull();
  });
});
