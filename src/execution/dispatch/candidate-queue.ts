import type { JetStreamClient, JetStreamManager } from "@nats-io/jetstream";
import { ConsumerDefinitionSchema, ensureStreams, type ConsumerDefinition } from "../../streams/index.js";
import { isMessageGone } from "../../nats/jetstream-codes.js";
import { encode } from "../../wire/codec.js";
import type { Candidate } from "../../wire/messages.js";
import { subjects } from "../../wire/subjects.js";
import { candidateConsumer, STREAMS } from "../../streams/names.js";

/**
 * The candidates: a WorkQueue stream, one message per assignment generation on
 * `tg.cand.<scope>.<binding>`, pulled by one durable consumer per scope that the scope's executors
 * share. A message holds ids only: arguments and the grant come with a successful claim.
 */
export class CandidateQueue {
  private readonly ensured = new Map<string, Promise<void>>();

  constructor(
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    private readonly options: { replicas: number; ackWaitMs: number },
  ) {}

  /** The durable consumer of a scope, declared like every object of `streams/` (made once, then checked). */
  scopeConsumerDefinition(scope: string): ConsumerDefinition {
    return ConsumerDefinitionSchema.parse({
      kind: "consumer",
      stream: STREAMS.candidates,
      durable_name: candidateConsumer(scope),
      description: `Candidates of scope ${scope}, shared by its executors`,
      filter_subject: subjects.candidateFilter(scope),
      ack_wait_ms: this.options.ackWaitMs,
    });
  }

  /** Creates the scope's consumer the first time this process needs it; a failure is retried next time. */
  ensureScopeConsumer(scope: string): Promise<void> {
    let done = this.ensured.get(scope);
    if (!done) {
      done = ensureStreams(this.jsm, [this.scopeConsumerDefinition(scope)], { replicas: this.options.replicas }).then(() => undefined);
      done.catch(() => this.ensured.delete(scope));
      this.ensured.set(scope, done);
    }
    return done;
  }

  /**
   * Publishes the candidate of one generation and returns its stream sequence. `Nats-Msg-Id` is
   * `<assignment>.<generation>`, so a second publisher (a sweeper, a retried request) is de-duplicated.
   */
  async publish(scope: string, candidate: Candidate): Promise<number> {
    await this.ensureScopeConsumer(scope);
    const ack = await this.js.publish(subjects.candidate(scope, candidate.binding_id), encode(candidate), {
      msgID: `${candidate.assignment_id}.${candidate.generation}`,
    });
    return ack.seq;
  }

  /**
   * Whether the candidate at `seq` will still reach an executor of `scope`: in the stream (waiting,
   * or taken but not yet acknowledged: an executor acknowledges once its claim was answered) and not
   * behind the scope consumer's ack floor.
   */
  async waiting(scope: string, seq: number): Promise<boolean> {
    if ((await this.jsm.streams.getMessage(STREAMS.candidates, { seq })) === null) return false;
    // In the stream is not enough: nats-server can leave a work-queue message at or below its
    // consumer's ack floor (seen under executor kills and gateway takeovers; nats-server#5727), and
    // the consumer never delivers it again. Such a candidate is deleted and counts as gone, so a
    // sweeper offers the assignment again with the next generation.
    const consumer = await this.jsm.consumers.info(STREAMS.candidates, candidateConsumer(scope)).catch(() => null);
    if (!consumer || seq > consumer.ack_floor.stream_seq) return true;
    await this.delete(seq);
    return false;
  }

  /** Deletes a withdrawn candidate; one already pulled and acknowledged is simply gone. */
  async delete(seq: number): Promise<void> {
    try {
      // No erase: the message carries no secret, and overwriting it costs a disk write for nothing.
      await this.jsm.streams.deleteMessage(STREAMS.candidates, seq, false);
    } catch (err) {
      // "sequence not found" for a hole inside the stream (the usual case: a work queue drops what was
      // acknowledged), "no message found" and "store EOF" at its ends.
      if (!isMessageGone(err)) throw err;
    }
  }
}
