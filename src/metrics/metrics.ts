import type { NatsConnection } from "@nats-io/transport-node";
import type { FastifyInstance } from "fastify";
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";
import type { JetStreamSnapshot } from "../streams/inspect.js";
import type { ReceiptStatus } from "../wire/messages.js";

/** The part of an assignment record the metrics read. */
export interface AssignmentSample {
  state: string;
  /** When the record was last written: for a pending one, when its candidate was published. */
  updated_at: number;
}

/** What the execution path reports; {@link GatewayMetrics} implements it, tests may pass {@link NO_METRICS}. */
export interface ExecutionMetrics {
  /** The receipt consumer's answer to one receipt (`kind` "unknown" for a message that is no receipt). */
  receiptProcessed(status: Exclude<ReceiptStatus, "pending">, kind: string): void;
  /** A compare-and-set write of an assignment: `previous` undefined when it was created. */
  assignmentWritten(previous: AssignmentSample | undefined, next: AssignmentSample): void;
  /** A claim answer: `granted` or the refusal code. */
  claimAnswered(outcome: string): void;
  /** A request of an executor (`claim`, `presence`, `rq`, `ctlq`) refused, with its code. */
  requestRefused(request: string, code: string): void;
  /** A projection stored (first writer only). */
  projectionStored(truncated: boolean): void;
  /** A new receipt decided after a read of the receipt index, or without one (`ReceiptProcessor.indexMayHold`). */
  receiptIndexLookup(outcome: "read" | "skipped"): void;
}

export const NO_METRICS: ExecutionMetrics = {
  receiptProcessed() {},
  assignmentWritten() {},
  claimAnswered() {},
  requestRefused() {},
  projectionStored() {},
  receiptIndexLookup() {},
};

/** A scrape reads JetStream at most this often; concurrent scrapes share one read. */
const SNAPSHOT_MAX_AGE_MS = 1_000;

const SECONDS_FAST = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const SECONDS_WAIT = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

/**
 * The metrics of one gateway process, on its own registry (two gateways in one process, as in
 * tests, never share counters). The execution path reports events through the small methods below;
 * JetStream consumer state and the NATS connection are read when Prometheus scrapes.
 *
 * Counters count what *this replica* did: sum them over replicas. Consumer and stream gauges are the
 * cluster-wide JetStream view every replica reports alike: take max, not sum.
 */
export class GatewayMetrics implements ExecutionMetrics {
  readonly registry = new Registry();

  private readonly receipts = new Counter({
    name: "toolgate_receipts_total",
    help: "Receipts processed by this replica, by answer status and receipt kind",
    labelNames: ["status", "kind"] as const,
    registers: [this.registry],
  });
  private readonly indexLookups = new Counter({
    name: "toolgate_receipt_index_lookups_total",
    help: "Receipts decided after reading the receipt index (read) or without it (skipped: an id bound to its claim, de-duplicated by the stream, inside its window)",
    labelNames: ["outcome"] as const,
    registers: [this.registry],
  });
  private readonly assignments = new Counter({
    name: "toolgate_assignments_total",
    help: "Assignment state changes written by this replica, by the state entered",
    labelNames: ["state"] as const,
    registers: [this.registry],
  });
  private readonly claims = new Counter({
    name: "toolgate_claims_total",
    help: "Claim requests answered by this replica: granted, or the refusal code",
    labelNames: ["outcome"] as const,
    registers: [this.registry],
  });
  private readonly refusals = new Counter({
    name: "toolgate_request_refusals_total",
    help: "Executor requests refused by this replica, by request subject (claim, presence, rq, ctlq) and refusal code",
    labelNames: ["request", "code"] as const,
    registers: [this.registry],
  });
  private readonly claimLatency = new Histogram({
    name: "toolgate_claim_latency_seconds",
    help: "Time an assignment waited as pending (since its candidate was published) until a claim was granted",
    buckets: SECONDS_WAIT,
    registers: [this.registry],
  });
  private readonly projections = new Counter({
    name: "toolgate_projections_total",
    help: "Projections stored by this replica, by whether the result was cut to its budget",
    labelNames: ["truncated"] as const,
    registers: [this.registry],
  });
  private readonly http = new Histogram({
    name: "toolgate_http_request_duration_seconds",
    help: "HTTP requests by route template, method and status (its _count is the request count)",
    labelNames: ["method", "route", "status_code"] as const,
    buckets: SECONDS_FAST,
    registers: [this.registry],
  });
  private readonly natsConnected = new Gauge({
    name: "toolgate_nats_connected",
    help: "1 while the NATS connection is up, 0 while disconnected or closed",
    registers: [this.registry],
  });
  private readonly natsReconnects = new Counter({
    name: "toolgate_nats_reconnects_total",
    help: "Reconnections of the NATS connection",
    registers: [this.registry],
  });

  private snapshotSource?: () => Promise<JetStreamSnapshot>;
  private snapshot?: { at: number; value: Promise<JetStreamSnapshot | undefined> };

  constructor() {
    collectDefaultMetrics({ register: this.registry });
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- prom-client calls collect() with the gauge as `this`
    const metrics = this;
    const consumerGauge = (name: string, help: string, pick: (c: JetStreamSnapshot["consumers"][number]) => number) =>
      new Gauge({
        name,
        help,
        labelNames: ["stream", "consumer"] as const,
        registers: [this.registry],
        collect: async function (this: Gauge<"stream" | "consumer">) {
          this.reset();
          const snap = await metrics.readSnapshot();
          for (const c of snap?.consumers ?? []) this.set({ stream: c.stream, consumer: c.name }, pick(c));
        },
      });
    consumerGauge("toolgate_consumer_pending_messages", "Messages not yet delivered to any client of the durable consumer", (c) => c.pending);
    consumerGauge("toolgate_consumer_ack_pending_messages", "Messages delivered and not yet acknowledged (bounded by max_ack_pending)", (c) => c.ackPending);
    consumerGauge("toolgate_consumer_redelivered_messages", "Unacknowledged messages delivered more than once", (c) => c.redelivered);
    new Gauge({
      name: "toolgate_stream_messages",
      help: "Messages stored in each declared stream",
      labelNames: ["stream"] as const,
      registers: [this.registry],
      collect: async function (this: Gauge<"stream">) {
        this.reset();
        const snap = await metrics.readSnapshot();
        for (const s of snap?.streams ?? []) if (s.error === undefined) this.set({ stream: s.name }, s.messages);
      },
    });
    new Gauge({
      name: "toolgate_jetstream_info_up",
      help: "1 when the last scrape could read every declared stream and its consumers",
      registers: [this.registry],
      collect: async function (this: Gauge) {
        const snap = await metrics.readSnapshot();
        this.set(snap !== undefined && snap.streams.every((s) => s.error === undefined) ? 1 : 0);
      },
    });
  }

  receiptProcessed(status: Exclude<ReceiptStatus, "pending">, kind: string): void {
    this.receipts.inc({ status, kind });
  }

  assignmentWritten(previous: AssignmentSample | undefined, next: AssignmentSample): void {
    if (previous?.state === next.state) return; // a write within a state (a task cancel, a compensation's link)
    this.assignments.inc({ state: next.state });
    if (previous?.state === "pending" && next.state === "claimed") this.claimLatency.observe(Math.max(0, next.updated_at - previous.updated_at) / 1000);
  }

  claimAnswered(outcome: string): void {
    this.claims.inc({ outcome });
  }

  requestRefused(request: string, code: string): void {
    this.refusals.inc({ request, code });
  }

  projectionStored(truncated: boolean): void {
    this.projections.inc({ truncated: String(truncated) });
  }

  receiptIndexLookup(outcome: "read" | "skipped"): void {
    this.indexLookups.inc({ outcome });
  }

  /** Times every request by its route template (never the raw URL: ids would explode the label set). */
  instrumentHttp(app: FastifyInstance): void {
    // A callback hook, not an async one: no promise per request.
    app.addHook("onResponse", (request, reply, done) => {
      this.http.observe(
        { method: request.method, route: request.routeOptions.url ?? "unmatched", status_code: String(reply.statusCode) },
        reply.elapsedTime / 1000,
      );
      done();
    });
  }

  /** Follows the connection's status events until it closes. */
  watchNats(nc: NatsConnection): void {
    this.natsConnected.set(nc.isClosed() ? 0 : 1);
    void (async () => {
      for await (const s of nc.status()) {
        if (s.type === "disconnect") this.natsConnected.set(0);
        else if (s.type === "reconnect") {
          this.natsConnected.set(1);
          this.natsReconnects.inc();
        }
      }
    })();
    void nc.closed().then(() => this.natsConnected.set(0));
  }

  /** Where the consumer and stream gauges read from on scrape. */
  readJetStreamFrom(source: () => Promise<JetStreamSnapshot>): void {
    this.snapshotSource = source;
  }

  private readSnapshot(): Promise<JetStreamSnapshot | undefined> {
    const source = this.snapshotSource;
    if (!source) return Promise.resolve(undefined);
    const now = Date.now();
    if (!this.snapshot || now - this.snapshot.at > SNAPSHOT_MAX_AGE_MS) this.snapshot = { at: now, value: source().catch(() => undefined) };
    return this.snapshot.value;
  }

  /** The Prometheus text exposition. */
  async exposition(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}
