import { connect, headers, type Msg, type MsgHdrs, type NatsConnection, type Subscription } from "@nats-io/transport-node";
import { coalesceWrites } from "../nats/coalesced-writes.js";
import { skipSettledRequestErrors } from "../nats/settled-requests.js";
import { jetstream, PubHeaders, type Consumer, type ConsumerMessages, type JetStreamClient } from "@nats-io/jetstream";
import type { z } from "zod";
import { decode, encode } from "../wire/codec.js";
import {
  Candidate,
  ClaimReply,
  ControlQueryResult,
  ExecutorControl,
  HeldClaimsReply,
  PresenceReply,
  ReceiptAnswer,
  ReceiptAnswers,
  ReceiptQueryReply,
  type ClaimRequest,
  type ControlQueryReply,
  type DetachedClaims,
  type HeldClaimsReport,
  type RequestRefused,
  type PresenceHeartbeat,
  type Receipt,
  type ReceiptQuery,
} from "../wire/messages.js";
import { natsClientOptions, type NatsClientEnv } from "../nats/client-options.js";
import { EXECUTOR_JS_API_PREFIX, executorInboxPrefix, subjects } from "../wire/subjects.js";
import { PROTOCOL_VERSION, PROTOCOL_VERSION_HEADER } from "../wire/protocol-version.js";
import { itemsOf } from "../wire/primitives.js";
import { markSentAfter } from "../wire/receipt-order.js";
import { chainHeaders, receiptTermsOf, type ReceiptTerms } from "../wire/receipt-chains.js";
import type { Logger } from "./logger.js";
import { candidateConsumer, STREAMS } from "../streams/names.js";

/** One pulled candidate and what the runner may do with its message. */
export interface CandidateDelivery {
  candidate: Candidate;
  /** Done with it (claimed, or refused for good): the work-queue message is removed. */
  ack(): void;
  /** Not for us, or not now: redelivered (to this scope's executors) after `delayMs`. */
  release(delayMs: number): void;
}

/** The gateway refused a query itself (`malformed`, `not_yours`): a bug of this executor, never a state to wait out. */
export class RequestRefusedError extends Error {
  override readonly name = "RequestRefusedError";
  readonly code: RequestRefused["code"];

  constructor(subject: string, refusal: RequestRefused) {
    super(`${subject} refused: ${refusal.code}: ${refusal.reason}`);
    this.code = refusal.code;
  }
}

/**
 * The runner's side of the wire contract (`src/wire/`): every subject it touches and every message it
 * sends or decodes goes through here, validated with the shared zod schemas.
 */
export class NatsLink {
  private readonly js: JetStreamClient;
  private readonly subscriptions: Subscription[] = [];
  private fetch: ConsumerMessages | undefined;
  private consumer: Promise<Consumer> | undefined;

  private constructor(
    readonly nc: NatsConnection,
    private readonly ownsConnection: boolean,
    private readonly scope: string,
    private readonly executorId: string,
    private readonly requestTimeoutMs: number,
    private readonly logger: Logger,
  ) {
    this.js = jetstream(nc, { timeout: requestTimeoutMs, apiPrefix: EXECUTOR_JS_API_PREFIX });
  }

  static async open(options: {
    natsUrl?: string | string[];
    nc?: NatsConnection;
    scope: string;
    executorId: string;
    requestTimeoutMs: number;
    logger: Logger;
    /** Credentials and TLS (the NATS_* settings) for a connection the link opens itself. */
    credentials: NatsClientEnv;
  }): Promise<NatsLink> {
    const { nc: given, natsUrl, scope, executorId, requestTimeoutMs, logger } = options;
    if (!given && !natsUrl) throw new Error("ToolRunner needs natsUrl or nc");
    // Reconnect forever: the outbox and presence survive a NATS restart, the runner must too.
    // The inbox prefix is the one the generated NATS config lets this executor (and only it) read.
    // noAsyncTraces: no stack trace captured per request and per receipt publish (see the gateway's connection).
    const nc =
      given ??
      (await connect({
        servers: natsUrl!,
        name: `toolgate-runner:${scope}:${executorId}`,
        maxReconnectAttempts: -1,
        reconnectTimeWait: 250,
        noAsyncTraces: true,
        inboxPrefix: executorInboxPrefix(scope, executorId),
        ...natsClientOptions(options.credentials),
      }));
    // A connection of its own writes its socket once per turn of the event loop (see coalesceWrites).
    if (!given) coalesceWrites(nc);
    // Process-wide: no error built for every answered request (see skipSettledRequestErrors).
    skipSettledRequestErrors();
    return new NatsLink(nc, !given, scope, executorId, requestTimeoutMs, logger);
  }

  /** Subscribes to this executor's receipt answers and control messages. */
  listen(answer: (answer: ReceiptAnswer) => void, control: (message: ExecutorControl) => void): void {
    this.subscribe(subjects.answers(this.scope, this.executorId), ReceiptAnswers, (message) => itemsOf(message).forEach(answer));
    this.subscribe(subjects.executorControl(this.scope, this.executorId), ExecutorControl, control);
  }

  /** The control messages stored for this executor since `since` (ms), oldest first. */
  queryControl(since: number): Promise<ControlQueryReply> {
    return this.query(subjects.controlQuery(this.scope, this.executorId), { executor_id: this.executorId, since }, ControlQueryResult);
  }

  /** Calls `handle` with the time the connection was lost, each time it is back. */
  onReconnect(handle: (disconnectedAt: number) => void): void {
    void (async () => {
      let lost = Date.now();
      for await (const status of this.nc.status()) {
        if (status.type === "disconnect") lost = Date.now();
        else if (status.type === "reconnect") handle(lost);
      }
    })();
  }

  heartbeat(message: PresenceHeartbeat): Promise<PresenceReply> {
    return this.request(subjects.presence(this.scope, this.executorId), message, PresenceReply);
  }

  /** Tells the gateway which claims this executor's store holds; resolves with what it detached from the others. */
  reportHeld(message: HeldClaimsReport): Promise<DetachedClaims> {
    return this.query(subjects.heldClaims(this.scope, this.executorId), message, HeldClaimsReply);
  }

  /** The claim's reply, and what its gateway takes of the claim's receipts (its headers). */
  async claim(message: ClaimRequest): Promise<{ reply: ClaimReply; terms: ReceiptTerms }> {
    const reply = await this.requestMessage(subjects.claim(this.scope, this.executorId), message);
    return { reply: decode(ClaimReply, reply.data), terms: receiptTermsOf(reply.headers) };
  }

  queryReceipt(message: ReceiptQuery): Promise<ReceiptAnswer> {
    return this.query(subjects.receiptQuery(this.scope, this.executorId), message, ReceiptQueryReply);
  }

  /**
   * Publishes into the receipts stream; resolves once JetStream stored it. `duplicate`: the stream
   * already had this `receipt_id` (inside its de-duplication window), so this copy reaches no gateway
   * and no answer will come for it.
   */
  async publishReceipt(receipt: Receipt, after?: string): Promise<{ duplicate: boolean }> {
    const ack = await this.js.publish(subjects.receipt(this.scope, this.executorId, receipt.assignment_id), encode(receipt), {
      msgID: receipt.receipt_id,
      headers: receiptHeaders(after),
    });
    return { duplicate: ack.duplicate };
  }

  /**
   * Publishes into the receipts stream without asking for its PubAck: for a receipt's first send,
   * whose confirmation is the gateway's answer (a gateway only sees what the stream stored). Nothing
   * says whether it was stored: the caller asks `tg.rq` when no answer comes, and resends with
   * `publishReceipt`.
   */
  postReceipt(receipt: Receipt, after?: string): void {
    const h = receiptHeaders(after);
    h.set(PubHeaders.MsgIdHdr, receipt.receipt_id);
    this.nc.publish(subjects.receipt(this.scope, this.executorId, receipt.assignment_id), encode(receipt), { headers: h });
  }

  /**
   * Publishes a read's first receipts as one message (a chain: `src/wire/receipt-chains.ts`), without
   * asking for its PubAck, as `postReceipt` does one receipt: the gateway's answers confirm it, and a
   * chain the stream did not store (this executor published on the subject before) gets none.
   */
  postChain(receipts: readonly Receipt[]): void {
    const [first] = receipts;
    if (!first) return;
    this.nc.publish(subjects.receipt(this.scope, this.executorId, first.assignment_id), encode(receipts), {
      headers: chainHeaders(first.receipt_id, protocolHeaders()),
    });
  }

  /**
   * Pulls up to `max` candidates from the scope's shared durable consumer, waiting at most
   * `expiresMs`; `stopPulling` ends a pull that is waiting.
   */
  async *pull(max: number, expiresMs: number): AsyncGenerator<CandidateDelivery> {
    // Looked up once (a JetStream API request), not per pull; a pull that fails looks it up again.
    this.consumer ??= this.js.consumers.get(STREAMS.candidates, candidateConsumer(this.scope));
    const lookup = this.consumer;
    let messages: ConsumerMessages;
    try {
      messages = await (await lookup).fetch({ max_messages: max, expires: expiresMs });
    } catch (err) {
      if (this.consumer === lookup) this.consumer = undefined;
      throw err;
    }
    this.fetch = messages;
    try {
      for await (const m of messages) {
        let candidate: Candidate;
        try {
          candidate = decode(Candidate, m.data);
        } catch (err) {
          this.logger.warn({ err, subject: m.subject }, "malformed candidate terminated");
          m.term(); // bare: nats-server 2.9 ignores `+TERM <reason>` (the reason is in the log line above)
          continue;
        }
        yield { candidate, ack: () => m.ack(), release: (delayMs) => m.nak(delayMs) };
      }
    } catch (err) {
      if (this.consumer === lookup) this.consumer = undefined;
      throw err;
    } finally {
      this.fetch = undefined;
    }
  }

  stopPulling(): void {
    this.fetch?.stop();
  }

  async close(): Promise<void> {
    this.stopPulling();
    for (const sub of this.subscriptions) sub.unsubscribe();
    if (this.ownsConnection && !this.nc.isClosed()) await this.nc.drain();
  }

  private async request<S extends z.ZodType>(subject: string, message: unknown, schema: S): Promise<z.output<S>> {
    return decode(schema, (await this.requestMessage(subject, message)).data);
  }

  private requestMessage(subject: string, message: unknown): Promise<Msg> {
    return this.nc.request(subject, encode(message), { timeout: this.requestTimeoutMs, headers: protocolHeaders() });
  }

  /** A request whose reply is the answer or a refusal of the request itself (thrown). */
  private async query<T extends object>(subject: string, message: unknown, schema: z.ZodType<T | RequestRefused>): Promise<T> {
    const reply = await this.request(subject, message, schema);
    if ("status" in reply && reply.status === "refused") throw new RequestRefusedError(subject, reply as RequestRefused);
    return reply as T;
  }

  private subscribe<S extends z.ZodType>(subject: string, schema: S, handle: (message: z.output<S>) => void): void {
    this.subscriptions.push(
      this.nc.subscribe(subject, {
        callback: (err, m) => {
          if (err) return this.logger.error({ err, subject }, "subscription failed");
          try {
            handle(decode(schema, m.data));
          } catch (e) {
            this.logger.warn({ err: e, subject }, "message dropped");
          }
        },
      }),
    );
  }
}

function protocolHeaders(): MsgHdrs {
  const h = headers();
  h.set(PROTOCOL_VERSION_HEADER, PROTOCOL_VERSION);
  return h;
}

/**
 * A receipt's headers: the protocol version, and when it is sent ahead of the answer to the one
 * before, that one's id (`Tg-After`) and that the runner takes both answers in one message.
 */
function receiptHeaders(after: string | undefined): MsgHdrs {
  const h = protocolHeaders();
  if (after !== undefined) markSentAfter(h, after);
  return h;
}
