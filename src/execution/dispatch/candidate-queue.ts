import { headers, type NatsConnection } from "@nats-io/transport-node";
import { jetstream, PubHeaders, type JetStreamClient, type JetStreamManager, type MsgRequest } from "@nats-io/jetstream";
import { ConsumerDefinitionSchema, ensureStreams, type ConsumerDefinition } from "../../streams/index.js";
import { isMessageGone } from "../../nats/jetstream-codes.js";
import { decode, encode } from "../../wire/codec.js";
import { Candidate } from "../../wire/messages.js";
import { subjects } from "../../wire/subjects.js";
import { candidateConsumer, STREAMS } from "../../streams/names.js";

/** Candidates of one assignment taken back at most (one per generation offered; a generation is offered once). */
const TAKE_BACK_MAX = 4;

/** The first message on `subject` at or after `seq`: the server takes `next_by_subj` since 2.9, nats.js types it for direct gets only. */
const firstFrom = (subject: string, seq: number) => ({ next_by_subj: subject, seq }) as unknown as MsgRequest;

/** Which assignment's candidate: its subject is `tg.cand.<scope>.<binding>.<assignment>`. */
export interface CandidateOf {
  readonly scope: string;
  readonly binding_id: string;
  readonly assignment_id: string;
  /** The sequence an earlier version wrote into the assignment (its candidates had no subject of their own). */
  readonly candidate_seq?: number | null;
}

/**
 * The candidates: a WorkQueue stream, one message per assignment generation on the assignment's own
 * subject `tg.cand.<scope>.<binding>.<assignment>`, pulled by one durable consumer per scope that the
 * scope's executors share. A message holds ids only: arguments and the grant come with a successful
 * claim. Found and taken back by subject, so nothing about it is written into the assignment.
 */
export class CandidateQueue {
  private readonly ensured = new Map<string, Promise<void>>();
  private readonly js: JetStreamClient;
  private offeredCount = 0;

  constructor(
    private readonly nc: NatsConnection,
    private readonly jsm: JetStreamManager,
    private readonly options: { replicas: number; ackWaitMs: number },
  ) {
    this.js = jetstream(nc);
  }

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
    this.offeredCount++;
    const { subject, data, msgId } = candidateMessage(scope, candidate);
    return (await this.js.publish(subject, data, { msgID: msgId })).seq;
  }

  /**
   * `publish` without asking for the PubAck: nothing says the stream stored it. For a new call's
   * first offer, whose creation watch (written before it) offers the call again should its
   * candidate never reach the stream (`LeaseSweeper`); a second publish under the same
   * `Nats-Msg-Id` is de-duplicated as before.
   */
  async post(scope: string, candidate: Candidate): Promise<void> {
    await this.ensureScopeConsumer(scope);
    this.offeredCount++;
    const { subject, data, msgId } = candidateMessage(scope, candidate);
    const h = headers();
    h.set(PubHeaders.MsgIdHdr, msgId);
    this.nc.publish(subject, data, { headers: h });
  }

  /** How many candidates this process has published so far: the anchor is renewed only once the stream moved on. */
  get offered(): number {
    return this.offeredCount;
  }

  /**
   * Stores a new anchor (`CandidateAnchor`) and deletes every one stored before it, by sequence (a
   * subject purge would move the consumers' ack floor on nats-server 2.9). Concurrent renewals by
   * several gateways leave the newest. Returns its sequence.
   */
  async anchor(): Promise<number> {
    const { seq } = await this.js.publish(subjects.candidateAnchor, new Uint8Array(0));
    for (let from = 0; ;) {
      const older = await this.jsm.streams.getMessage(STREAMS.candidates, firstFrom(subjects.candidateAnchor, from));
      if (!older || older.seq >= seq) return seq;
      await this.delete(older.seq);
      from = older.seq + 1;
    }
  }

  /** The assignment's newest candidate still in the stream, with its sequence; null when none is. */
  async find(of: CandidateOf): Promise<{ seq: number; candidate: Candidate } | null> {
    const stored = await this.jsm.streams.getMessage(STREAMS.candidates, { last_by_subj: subjects.candidate(of.scope, of.binding_id, of.assignment_id) });
    return stored && { seq: stored.seq, candidate: decode(Candidate, stored.data) };
  }

  /**
   * Whether the assignment's candidate of `generation` will still reach an executor of its scope: in
   * the stream (waiting, or taken but not yet acknowledged: an executor acknowledges once its claim
   * was answered) and not behind the scope consumer's ack floor.
   */
  async waiting(of: CandidateOf, generation: number): Promise<boolean> {
    const found = await this.find(of);
    if (!found || found.candidate.generation !== generation) return false;
    const { scope } = of;
    const seq = found.seq;
    // In the stream is not enough: nats-server can leave a work-queue message at or below its
    // consumer's ack floor (seen under executor kills and gateway takeovers; nats-server#5727), and
    // the consumer never delivers it again. Such a candidate is deleted and counts as gone, so a
    // sweeper offers the assignment again with the next generation.
    const consumer = await this.jsm.consumers.info(STREAMS.candidates, candidateConsumer(scope)).catch(() => null);
    if (!consumer || seq > consumer.ack_floor.stream_seq) return true;
    await this.delete(seq);
    return false;
  }

  /**
   * Takes back the candidates of a withdrawn assignment still in the stream (one already pulled and
   * acknowledged is simply gone), and the one an earlier version recorded by sequence. Each is
   * deleted by its sequence, not purged by subject: a filtered purge moves the consumers' ack floor
   * on nats-server 2.9, past candidates of other assignments still waiting.
   */
  async takeBack(of: CandidateOf): Promise<void> {
    for (let left = TAKE_BACK_MAX; left > 0; left--) {
      const found = await this.find(of);
      if (!found) break;
      await this.delete(found.seq);
    }
    if (of.candidate_seq != null) await this.delete(of.candidate_seq);
  }

  /** Deletes the candidate at `seq`; one already pulled and acknowledged is simply gone. */
  private async delete(seq: number): Promise<void> {
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

/** A candidate as published: on its assignment's own subject, de-duplicated once per assignment generation. */
function candidateMessage(scope: string, candidate: Candidate): { subject: string; data: Uint8Array; msgId: string } {
  return {
    subject: subjects.candidate(scope, candidate.binding_id, candidate.assignment_id),
    data: encode(candidate),
    msgId: `${candidate.assignment_id}.${candidate.generation}`,
  };
}
