import { randomUUID } from "node:crypto";
import { headers, type NatsConnection, type Subscription } from "@nats-io/transport-node";
import { jetstream, PubHeaders, type Consumer, type JetStreamClient } from "@nats-io/jetstream";
import { decode, encode } from "../../src/wire/codec.js";
import { receiptBodyDigest } from "../../src/wire/digest.js";
import { receiptId } from "../../src/wire/receipt-ids.js";
import {
  Candidate,
  ClaimReply,
  ExecutorControl,
  HeldClaimsReply,
  PresenceReply,
  ReceiptAnswer,
  ReceiptAnswers,
  ReceiptQueryReply,
  type Grant,
  type PresenceHeartbeat,
  type Receipt,
} from "../../src/wire/messages.js";
import { itemsOf } from "../../src/wire/primitives.js";
import { EXECUTOR_JS_API_PREFIX, subjects } from "../../src/wire/subjects.js";
import { markSentAfter } from "../../src/wire/receipt-order.js";
import { chainHeaders, chainShape, receiptTermsOf, type ReceiptTerms } from "../../src/wire/receipt-chains.js";
import { registerExecutor } from "./registry.js";
import { candidateConsumer, STREAMS } from "../../src/streams/names.js";

/** The candidates set aside by `pullFor`, per connection and scope. */
const setAsides = new WeakMap<NatsConnection, Map<string, Map<string, Candidate>>>();
function setAsideOf(nc: NatsConnection, scope: string): Map<string, Candidate> {
  const scopes = setAsides.get(nc) ?? new Map<string, Map<string, Candidate>>();
  setAsides.set(nc, scopes);
  const candidates = scopes.get(scope) ?? new Map<string, Candidate>();
  scopes.set(scope, candidates);
  return candidates;
}

type ReceiptBody = Receipt extends infer R ? (R extends Receipt ? Omit<R, "receipt_id" | "assignment_id" | "executor_id" | "claim_token"> : never) : never;

/**
 * A minimal executor that speaks the wire protocol directly (no SDK): heartbeat, pull candidates,
 * claim, publish receipts and wait for their answers. Tests use it to drive the gateway precisely,
 * including the things a real executor would never do.
 *
 * Before its first heartbeat or claim it registers itself in the executor registry (the gateway's
 * authority over claims) with the bindings it declares, on its own connection (`registerExecutor`);
 * idempotent. `register: false` leaves the registry to the test (an executor meant to be
 * unregistered, or one whose connection cannot reach the registry's bucket).
 */
export class ProtocolExecutor {
  readonly controls: ExecutorControl[] = [];
  private readonly js: JetStreamClient;
  private readonly answers = new Map<string, ReceiptAnswer[]>();
  /** Every answer message received, as the answers it held. */
  readonly answerMessages: ReceiptAnswer[][] = [];
  private readonly waiters = new Map<string, Array<(a: ReceiptAnswer) => void>>();
  private subs: Subscription[] = [];
  private registered: Promise<void> | undefined;
  private candidates: Promise<Consumer> | undefined;
  /** Candidates `pullFor` pulled while looking for another call, by assignment id (the newest generation). */
  private readonly setAside: Map<string, Candidate>;

  constructor(
    readonly nc: NatsConnection,
    readonly scope: string,
    readonly executorId: string,
    readonly bindings: string[],
    private readonly options: { register?: boolean } = {},
  ) {
    this.js = jetstream(nc, { apiPrefix: EXECUTOR_JS_API_PREFIX });
    this.setAside = setAsideOf(nc, scope);
    this.subs.push(
      nc.subscribe(subjects.answers(scope, executorId), {
        callback: (_err, msg) => {
          const answers = itemsOf(decode(ReceiptAnswers, msg.data));
          this.answerMessages.push(answers);
          for (const answer of answers) {
            this.answers.set(answer.receipt_id, [...(this.answers.get(answer.receipt_id) ?? []), answer]);
            for (const w of this.waiters.get(answer.receipt_id) ?? []) w(answer);
            this.waiters.delete(answer.receipt_id);
          }
        },
      }),
      nc.subscribe(subjects.executorControl(scope, executorId), { callback: (_err, msg) => void this.controls.push(decode(ExecutorControl, msg.data)) }),
    );
  }

  /** Registers this executor (scope, declared bindings, no nkey) unless told not to; once. */
  register(): Promise<void> {
    if (this.options.register === false) return Promise.resolve();
    this.registered ??= registerExecutor(this.nc, { executor_id: this.executorId, scope: this.scope, bindings: this.bindings }).then(() => undefined);
    return this.registered;
  }

  async heartbeat(status: PresenceHeartbeat["status"] = "online"): Promise<PresenceReply> {
    await this.register();
    const beat: PresenceHeartbeat = { executor_id: this.executorId, scope: this.scope, bindings: this.bindings, status, in_flight: 0 };
    const reply = await this.nc.request(subjects.presence(this.scope, this.executorId), encode(beat), { timeout: 5_000 });
    return decode(PresenceReply, reply.data);
  }

  /** Pulls up to `max` candidates of the scope (acknowledging them), waiting at most `expiresMs`. */
  async pull(max = 1, expiresMs = 2_000): Promise<Candidate[]> {
    // Looked up once, as the ToolRunner does: a lookup per pull is a consumer-info request per pull.
    this.candidates ??= this.js.consumers.get(STREAMS.candidates, candidateConsumer(this.scope));
    const consumer = await this.candidates.catch((err: unknown) => {
      this.candidates = undefined;
      throw err;
    });
    const out: Candidate[] = [];
    const batch = await consumer.fetch({ max_messages: max, expires: expiresMs }).catch((err: unknown) => {
      this.candidates = undefined; // the consumer may be gone (a test replaced it): look it up again next time
      throw err;
    });
    try {
      for await (const m of batch) {
        out.push(decode(Candidate, m.data));
        m.ack();
      }
    } catch (err) {
      // A fetch can end in an error (missed heartbeats on a busy machine) after handing out messages:
      // those are acknowledged already and must not be dropped.
      if (out.length === 0) throw err;
    }
    return out;
  }

  /**
   * Pulls until a candidate for `assignmentId` (of at least `generation`) arrives. Candidates of other
   * calls it pulls on the way are acknowledged and set aside for a later `pullFor` of any executor of
   * the scope on the same connection (a candidate is an offer to the scope, not to one executor):
   * the gateway may offer several calls at once in either order (an operator detach re-offers them
   * concurrently), and a dropped one would never come back.
   */
  async pullFor(assignmentId: string, generation = 0, attempts = 500): Promise<Candidate> {
    for (let i = 0; i < attempts; i++) {
      const kept = this.setAside.get(assignmentId);
      if (kept && kept.generation >= generation) {
        this.setAside.delete(assignmentId);
        return kept;
      }
      let found: Candidate | undefined;
      for (const c of await this.pull(1, 1_000)) {
        if (!found && c.assignment_id === assignmentId && c.generation >= generation) found = c;
        else if ((this.setAside.get(c.assignment_id)?.generation ?? -1) < c.generation) this.setAside.set(c.assignment_id, c);
      }
      if (found) return found;
    }
    throw new Error(`no candidate for ${assignmentId}`);
  }

  async claim(assignmentId: string, generation: number): Promise<ClaimReply> {
    return (await this.claimWithOrder(assignmentId, generation)).reply;
  }

  /** `claim`, and what the gateway takes of the claim's receipts (its reply's headers): sent ahead of their answers, chains. */
  async claimWithOrder(assignmentId: string, generation: number): Promise<{ reply: ClaimReply } & ReceiptTerms> {
    await this.register();
    const reply = await this.nc.request(
      subjects.claim(this.scope, this.executorId),
      encode({ assignment_id: assignmentId, executor_id: this.executorId, generation }),
      { timeout: 5_000 },
    );
    return { reply: decode(ClaimReply, reply.data), ...receiptTermsOf(reply.headers) };
  }

  /** Reports the claims this executor holds (`tg.held`), as a restarted executor does before it pulls. */
  async reportHeld(held: ReadonlyArray<{ assignment_id: string; generation: number }>, scope = this.scope): Promise<HeldClaimsReply> {
    await this.register();
    const report = { executor_id: this.executorId, scope, held };
    const reply = await this.nc.request(subjects.heldClaims(this.scope, this.executorId), encode(report), { timeout: 5_000 });
    return decode(HeldClaimsReply, reply.data);
  }

  /** A receipt for a grant; `receipt_id` is fresh unless given. */
  receipt(grant: Grant, body: ReceiptBody, receiptId: string = `rc-${randomUUID()}`, token = grant.claim_token): Receipt {
    return { receipt_id: receiptId, assignment_id: grant.assignment_id, executor_id: this.executorId, claim_token: token, ...body } as Receipt;
  }

  /** A receipt under the id `receiptId` mints for it, as the ToolRunner names its receipts (bound to the claim, kind and seq). */
  claimReceipt(grant: Grant, body: ReceiptBody): Receipt {
    return this.receipt(grant, body, receiptId(grant, body));
  }

  /** The `accepted` receipt of a grant, naming the grant's argument digest as a real executor does. */
  accepted(grant: Grant, receiptId?: string): Receipt {
    return this.receipt(grant, { kind: "accepted", operation_key: grant.operation_key, argument_digest: grant.argument_digest }, receiptId);
  }

  /**
   * Publishes a receipt into the receipts stream and resolves with the gateway's answer; a resend
   * the stream de-duplicated gets no answer, so then the stored one is asked for on `tg.rq`.
   * Another `msgID` than the receipt id simulates a resend after the stream's de-duplication window.
   */
  async send(receipt: Receipt, msgID: string = receipt.receipt_id): Promise<ReceiptQueryReply> {
    const answered = this.answerFor(receipt.receipt_id);
    const ack = await this.js.publish(subjects.receipt(this.scope, this.executorId, receipt.assignment_id), encode(receipt), { msgID });
    if (ack.duplicate) {
      answered.catch(() => undefined); // no answer comes for a de-duplicated copy
      return this.query(receipt);
    }
    return answered;
  }

  /**
   * Publishes a receipt and waits for its answer, as an executor's first send on the hot path: into
   * the receipts stream without asking for its PubAck (the gateway's answer confirms it), then the
   * stored answer is asked for if none comes within `timeoutMs`. `after`: the receipt named when
   * sent ahead of that one's answer, taking both answers in one message unless `jointAnswers` is
   * false (as an executor older than joint answers).
   */
  async post(receipt: Receipt, timeoutMs = 10_000, after?: string, { jointAnswers = true } = {}): Promise<ReceiptQueryReply> {
    const answered = this.answerFor(receipt.receipt_id, timeoutMs);
    const h = headers();
    h.set(PubHeaders.MsgIdHdr, receipt.receipt_id);
    if (after !== undefined) markSentAfter(h, after, jointAnswers);
    this.nc.publish(subjects.receipt(this.scope, this.executorId, receipt.assignment_id), encode(receipt), { headers: h });
    return answered.catch(() => this.query(receipt));
  }

  /**
   * Posts a claim's receipts in order: each after the answer to the one before, or, under a gateway
   * that keeps receipts sent ahead in order (`ordersReceipts`), one that follows a progress report
   * (or, for a read, `aheadOfAccepted`, the claim's `accepted`) right behind it, naming it, as the
   * ToolRunner sends them. Resolves with their answers.
   */
  async postInOrder(
    receipts: readonly Receipt[],
    ordersReceipts: boolean,
    { timeoutMs = 10_000, aheadOfAccepted = false }: { timeoutMs?: number; aheadOfAccepted?: boolean } = {},
  ): Promise<ReceiptQueryReply[]> {
    const answers: Array<Promise<ReceiptQueryReply>> = [];
    for (const [i, receipt] of receipts.entries()) {
      const before = receipts[i - 1];
      const ahead = ordersReceipts && (before?.kind === "progress" || (aheadOfAccepted && before?.kind === "accepted"));
      if (before && !ahead) await answers[i - 1];
      answers.push(this.post(receipt, timeoutMs, ahead ? before!.receipt_id : undefined));
    }
    return Promise.all(answers);
  }

  /**
   * Publishes receipts as one message (a chain: a read's first receipts, `src/wire/receipt-chains.ts`)
   * without asking for its PubAck, and resolves with their answers (the stored one asked for where
   * none comes within `timeoutMs`). `headers` replaces the chain's own, to send one that breaks the
   * rules a gateway relies on.
   */
  async postChain(receipts: readonly Receipt[], { timeoutMs = 10_000, headers: h = chainHeaders(receipts[0]!.receipt_id) } = {}): Promise<ReceiptQueryReply[]> {
    const answers = receipts.map((r) => this.answerFor(r.receipt_id, timeoutMs).catch(() => this.query(r)));
    this.nc.publish(subjects.receipt(this.scope, this.executorId, receipts[0]!.assignment_id), encode(receipts), { headers: h });
    return Promise.all(answers);
  }

  /**
   * Posts a claim's receipts as the ToolRunner sends them under the gateway's `terms`: a read's first
   * ones as one chain where the gateway takes chains, else in order (`postInOrder`, a read's report
   * and final receipt right behind its `accepted`).
   */
  postAsRunner(
    receipts: readonly Receipt[],
    terms: ReceiptTerms,
    { read, timeoutMs = 10_000 }: { read: boolean; timeoutMs?: number },
  ): Promise<ReceiptQueryReply[]> {
    if (terms.takesChains && read && chainShape(receipts.map((r) => r.kind))) return this.postChain(receipts, { timeoutMs });
    return this.postInOrder(receipts, terms.ordersReceipts, { timeoutMs, aheadOfAccepted: read });
  }

  /** The next answer for `receiptId` on this executor's answer subject (register before publishing). */
  answerFor(receiptId: string, timeoutMs = 10_000): Promise<ReceiptAnswer> {
    const answered = new Promise<ReceiptAnswer>((resolve) => this.waiters.set(receiptId, [...(this.waiters.get(receiptId) ?? []), resolve]));
    return withTimeout(answered, timeoutMs, `no answer for receipt ${receiptId}`);
  }

  /** Asks `tg.rq` about a receipt, naming its body digest (given, for a body that has none). */
  async query(receipt: Receipt, bodyDigest = receiptBodyDigest(receipt)): Promise<ReceiptQueryReply> {
    const q = {
      receipt_id: receipt.receipt_id,
      assignment_id: receipt.assignment_id,
      executor_id: this.executorId,
      kind: receipt.kind,
      body_digest: bodyDigest,
    };
    const reply = await this.nc.request(subjects.receiptQuery(this.scope, this.executorId), encode(q), { timeout: 5_000 });
    return decode(ReceiptQueryReply, reply.data);
  }

  close(): void {
    for (const s of this.subs) s.unsubscribe();
    this.subs = [];
  }
}

export function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([p, new Promise<T>((_, reject) => (timer = setTimeout(() => reject(new Error(what)), ms)))]).finally(() => clearTimeout(timer));
}
