import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NatsConnection } from "@nats-io/transport-node";
import { AckPolicy, DeliverPolicy, jetstream, type JetStreamManager } from "@nats-io/jetstream";
import { CandidateQueue } from "../../../src/execution/dispatch/candidate-queue.js";
import { decode, encode } from "../../../src/wire/codec.js";
import { Candidate } from "../../../src/wire/messages.js";
import { subjects } from "../../../src/wire/subjects.js";
import { candidateConsumer, STREAMS } from "../../../src/streams/names.js";
import { candidate, startCandidateStream, type CandidateStream } from "./candidate-stream.js";

/**
 * A candidate nats-server left stored behind its consumer's ack floor (nats-server#5727) is never
 * delivered again. The state is made with a consumer filter update, which nats-server 2.10 brought:
 * the Debian 2.9 run of scripts/test-matrix.sh leaves this file out for that reason.
 */
describe("an orphaned candidate", () => {
  let stream: CandidateStream, nc: NatsConnection, jsm: JetStreamManager;
  beforeAll(async () => {
    stream = await startCandidateStream();
    ({ nc, jsm } = stream);
  });
  afterAll(() => stream?.close());

  it("takes a candidate left behind its consumer's ack floor as gone (never delivered again), deletes it, and delivers the next generation", async () => {
    const scope = "orphans";
    const js = jetstream(nc);
    // The state nats-server can leave a work-queue message in: still stored, its consumer's ack floor
    // past it. Made here by a consumer that first filtered it out, acknowledged a later one, and was
    // then widened to the scope's filter.
    const orphan = { ...candidate(10), generation: 0 };
    const orphanSeq = (await js.publish(subjects.candidate(scope, "tasks", "asg-10"), encode(orphan), { msgID: "asg-10.0" })).seq;
    await jsm.consumers.add(STREAMS.candidates, {
      durable_name: candidateConsumer(scope),
      filter_subject: subjects.candidate(scope, "other", "asg-11"),
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
    });
    await js.publish(subjects.candidate(scope, "other", "asg-11"), encode({ ...candidate(11), binding_id: "other" }), { msgID: "asg-11.0" });
    for await (const m of await (await js.consumers.get(STREAMS.candidates, candidateConsumer(scope))).fetch({ max_messages: 1, expires: 2_000 }))
      await m.ackAck();
    await jsm.consumers.update(STREAMS.candidates, candidateConsumer(scope), { filter_subject: subjects.candidateFilter(scope) });
    await js.publish(subjects.candidate(scope, "tasks", "asg-12"), encode(candidate(12)), { msgID: "asg-12.0" });
    expect(orphanSeq).toBeLessThanOrEqual((await jsm.consumers.info(STREAMS.candidates, candidateConsumer(scope))).ack_floor.stream_seq);

    const orphans = new CandidateQueue(nc, jsm, { replicas: 1, ackWaitMs: 30_000 });
    const of = (n: number) => ({ scope, binding_id: "tasks", assignment_id: `asg-${n}` });
    await expect(orphans.waiting(of(10), 0)).resolves.toBe(false);
    await expect(jsm.streams.getMessage(STREAMS.candidates, { seq: orphanSeq })).resolves.toBeNull();
    await expect(orphans.waiting(of(12), 0)).resolves.toBe(true);
    // The next generation of the orphan's assignment is delivered.
    await orphans.publish(scope, { ...orphan, generation: 1 });
    const delivered: string[] = [];
    for await (const m of await (await js.consumers.get(STREAMS.candidates, candidateConsumer(scope))).fetch({ max_messages: 2, expires: 2_000 })) {
      const c = decode(Candidate, m.data);
      delivered.push(`${c.assignment_id}.${c.generation}`);
      m.ack();
    }
    expect(delivered.sort()).toEqual(["asg-10.1", "asg-12.0"]);
  });
});
