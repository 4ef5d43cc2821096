import type { NatsConnection, Subscription } from "@nats-io/transport-node";
import { jetstream, jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import type { Binding, ResolvedTool, Session } from "../config/schemas.js";
import type { Logger } from "../log/logger.js";
import { NO_METRICS, type ExecutionMetrics } from "../metrics/metrics.js";
import type { Definition } from "../streams/index.js";
import type { RegistryReader } from "../executors/admission.js";
import {
  ClaimRequest,
  ControlQuery,
  HeldClaimsReport,
  PresenceHeartbeat,
  ReceiptQuery,
  type ClaimReply,
  type ControlQueryResult,
  type HeldClaimsReply,
  type PresenceReply,
  type ReceiptQueryReply,
  type RequestRefused,
} from "../wire/messages.js";
import { subjects } from "../wire/subjects.js";
import { executionStores } from "../kv/buckets.js";
import { CandidateQueue } from "./dispatch/candidate-queue.js";
import { CandidateAnchor } from "./dispatch/candidate-anchor.js";
import { ClaimQuota } from "./claims/claim-quota.js";
import { ClaimService } from "./claims/claim-service.js";
import { CompensationService } from "./operations/compensation.js";
import { ControlChannel } from "./transport/control-channel.js";
import { ControlRequestConsumer } from "./transport/control-requests.js";
import { ExecutorDetacher } from "./operations/executor-detach.js";
import { HeldClaimsReports } from "./operations/held-claims-report.js";
import { Dispatcher } from "./dispatch/dispatcher.js";
import { RunEventLog } from "./events/event-log.js";
import { HistoryReader } from "./runs/history.js";
import { LeaseSweeper } from "./claims/lease-sweeper.js";
import { OperatorDetach } from "./operations/operator-detach.js";
import { OperatorSettlement } from "./operations/operator-settle.js";
import { PresenceService } from "./claims/presence.js";
import { ProgressStore } from "./receipts/progress-store.js";
import { ProjectionStore } from "./receipts/projection-store.js";
import { CURRENT_STORE_LAYOUT, type StoreLayout } from "./model/store-layout.js";
import { LOOK_AGAIN_MS, ReceiptConsumer } from "./receipts/receipt-consumer.js";
import { ReceiptIndex } from "./receipts/receipt-index.js";
import { ReceiptLog } from "./receipts/receipt-log.js";
import { ReceiptProcessor } from "./receipts/receipt-processor.js";
import { AssignmentRecord, ClaimHoldings, PresenceRecord, ProgressEntry, ProjectionRecord, ReceiptIndexEntry, RunRecord } from "./model/records.js";
import { serveRequests, type Refusal } from "./transport/responder.js";
import { receiptOrderHeaders } from "../wire/receipt-order.js";
import { markTakesChains } from "../wire/receipt-chains.js";
import { runEvents } from "./events/run-events.js";
import { AssignmentEvents, DEFERRED_EVENTS_MS } from "./events/assignment-events.js";
import { RunLookup } from "./runs/run-lookup.js";
import { RunService } from "./runs/runs.js";
import { BackgroundTasks } from "./tasks/background-tasks.js";
import { TaskCancelService } from "./operations/task-cancel.js";
import { ToolCallService } from "./runs/tool-calls.js";
import { openWatchlist } from "./claims/watchlist.js";
import { EXECUTION_BUCKETS, STREAMS } from "../streams/names.js";

export interface ExecutionOptions {
  /** How long an unconfirmed claim lives before it returns to the candidates. */
  leaseMs: number;
  /** How often this process's lease sweeper runs. */
  sweepIntervalMs: number;
  /** After this long a sweeper finishes what a request left half-way when its process died: a tool call's creation, a run's end. */
  dispatchGraceMs: number;
  /** How long an executor may hold a pulled candidate before it is redelivered to another. */
  candidateAckWaitMs: number;
  /**
   * How often a sweeper looks at an offered candidate (the first time at the earlier of this and
   * `dispatchGraceMs` after creation); one taken but still unclaimed then is offered again with the
   * next generation.
   */
  reofferAfterMs: number;
  /** Receipts processed at once by this process. */
  receiptConcurrency: number;
  /**
   * The waits (ms) of a receipt whose named one has not had its turn yet, each followed by another
   * look, before it is held back (`ReceiptConsumer`).
   */
  receiptLookAgainMs: readonly number[];
  /** Replica count of the per-scope consumers made at run time. */
  replicas: number;
  /** Claims one executor may hold at once (claimed or running); beyond it a claim is `too_many_claims`. */
  maxClaimsPerExecutor: number;
  /** SSE heartbeat comment interval of the run event stream. */
  eventHeartbeatMs: number;
  /** What this gateway writes (it reads every layout): see `StoreLayout`. */
  storeLayout: StoreLayout;
  /**
   * How long the run events a creation or a claim left in its record (store layout 7) wait for the
   * record's next write before this gateway publishes them itself (`AssignmentEvents`).
   */
  deferredEventsMs: number;
}

/** nats-server's default `max_payload`, for the moment before the connection has the server's INFO. */
const DEFAULT_MAX_PAYLOAD = 1024 * 1024;

export const DEFAULT_EXECUTION_OPTIONS: ExecutionOptions = {
  leaseMs: 30_000,
  sweepIntervalMs: 1_000,
  dispatchGraceMs: 10_000,
  candidateAckWaitMs: 30_000,
  reofferAfterMs: 60_000,
  receiptConcurrency: 64,
  receiptLookAgainMs: LOOK_AGAIN_MS,
  replicas: 1,
  maxClaimsPerExecutor: 64,
  eventHeartbeatMs: 15_000,
  storeLayout: CURRENT_STORE_LAYOUT,
  deferredEventsMs: DEFERRED_EVENTS_MS,
};

/** What the execution path reads from the configuration plane (ConfigStore provides all of it). */
export interface ConfigReader {
  getBinding(bindingId: string): Promise<Binding | null>;
  getSession(sessionId: string): Promise<Session | null>;
  getAgentVersion(agentVersion: string): Promise<{ toolset: string; toolset_version: string } | null>;
  resolveTool(sessionId: string, toolName: string): Promise<ResolvedTool>;
}

/** The running execution path of one gateway process. */
export interface Execution {
  readonly options: ExecutionOptions;
  readonly runs: RunService;
  readonly toolCalls: ToolCallService;
  readonly history: HistoryReader;
  readonly events: RunEventLog;
  readonly taskCancel: TaskCancelService;
  readonly compensation: CompensationService;
  readonly settlement: OperatorSettlement;
  readonly detach: OperatorDetach;
  readonly sweeper: LeaseSweeper;
  /** Unsubscribes, stops the consumer and the sweeper; in-flight work finishes or is redelivered. */
  stop(): Promise<void>;
}

/**
 * Assignments whose last written or read revision this process keeps for claims and receipts to
 * start from (`VersionedStore.recent`): the work in flight of a busy gateway, a few MiB.
 */
const ASSIGNMENTS_REMEMBERED = 4_096;

/**
 * Runs whose last written or read revision this process keeps: a tool call's creation and its claim
 * start from it. Receipts read no run: its end reaches each assignment before the run is terminal.
 */
const RUNS_REMEMBERED = 1_024;

/** Executors whose claim holdings this process keeps the last revision of (see `ClaimQuota.read`). */
const EXECUTORS_REMEMBERED = 1_024;

/**
 * The receipts stream's de-duplication window as the server holds it (not as `streams/` declares
 * it: an operator may have changed it): the receipt processor relies on it. Read once, at start.
 */
async function receiptsDedupWindowMs(jsm: JetStreamManager): Promise<number> {
  const info = await jsm.streams.info(STREAMS.receipts);
  return Math.floor((info.config.duplicate_window ?? 0) / 1e6);
}

/** The presence TTL is the max age declared for the presence bucket: one number, in `streams/`. */
export function presenceTtlMs(definitions: readonly Definition[]): number {
  const def = definitions.find((d) => d.kind === "kv" && d.bucket === EXECUTION_BUCKETS.presence);
  if (def?.kind !== "kv" || def.ttl_ms <= 0) throw new Error(`streams/: the KV bucket ${EXECUTION_BUCKETS.presence} must be declared with a ttl_ms`);
  return def.ttl_ms;
}

/**
 * Wires the execution path on one NATS connection and starts its NATS side: the claim, presence,
 * held-claims and receipt-query responders (gateway queue group), the shared receipt and
 * control-request consumers and the lease sweeper. Every run and assignment write is told on the
 * run's event stream. The streams and buckets must exist (applied from `streams/` beforehand).
 */
export async function startExecution(deps: {
  nc: NatsConnection;
  config: ConfigReader;
  /** The executor registry: the authority over claims and heartbeats, read at every one (a view, holding the registry before this starts). */
  registry: RegistryReader;
  definitions: readonly Definition[];
  log: Logger;
  options?: Partial<ExecutionOptions>;
  metrics?: ExecutionMetrics;
}): Promise<Execution> {
  const { nc, config, log } = deps;
  const metrics = deps.metrics ?? NO_METRICS;
  const options = { ...DEFAULT_EXECUTION_OPTIONS, ...deps.options };
  const js = jetstream(nc);
  const jsm = await jetstreamManager(nc);
  const store = await executionStores(nc);

  const events = new RunEventLog(nc, js, log, options.storeLayout);
  const runStore = (await store("runs", RunRecord))
    .withRevisionCache(RUNS_REMEMBERED)
    .observeWrites((previous, next) => events.publish(runEvents(previous, next)));
  const assignmentStore = (await store("assignments", AssignmentRecord))
    .withRevisionCache(ASSIGNMENTS_REMEMBERED)
    .observeWrites((previous, next) => metrics.assignmentWritten(previous, next))
    .observeWrites((previous, next) => {
      if (next.projection && !previous?.projection) metrics.projectionStored(next.projection.context_preview.truncated);
    });
  const assignmentEvents = new AssignmentEvents(assignmentStore, events, options.storeLayout, log, options.deferredEventsMs);
  assignmentEvents.attach();
  const runLookup = new RunLookup(runStore);
  assignmentStore.observeWrites((_previous, next) => runLookup.remember(next.assignment_id, next.run_id));
  const control = new ControlChannel(js, jsm);
  const watchlist = await openWatchlist(store, options.storeLayout);
  const candidates = new CandidateQueue(nc, jsm, { replicas: options.replicas, ackWaitMs: options.candidateAckWaitMs });
  const dispatcher = new Dispatcher(runStore, assignmentStore, candidates, watchlist, options.reofferAfterMs, options.dispatchGraceMs);
  const detacher = new ExecutorDetacher(assignmentStore, watchlist, dispatcher, config, log);
  const presenceStore = await store("presence", PresenceRecord);
  // Claims ask this process's view of presence; it holds the bucket before any responder subscribes.
  const presenceView = await presenceStore.view(nc);
  await presenceView.ready;
  const presence = new PresenceService(presenceStore, presenceView, deps.registry, config, candidates, detacher, presenceTtlMs(deps.definitions));
  const heldClaims = new HeldClaimsReports(deps.registry, detacher);
  const quota = new ClaimQuota((await store("claims", ClaimHoldings)).withRevisionCache(EXECUTORS_REMEMBERED), assignmentStore, options.maxClaimsPerExecutor);
  const receiptLog = new ReceiptLog(jsm);
  const claims = new ClaimService(
    runLookup,
    assignmentStore,
    deps.registry,
    presence,
    watchlist,
    dispatcher,
    quota,
    receiptLog,
    options.leaseMs,
    presence.ttlMs,
  );
  const progress = new ProgressStore(await store("progress", ProgressEntry), options.storeLayout);
  const index = new ReceiptIndex(await store("receiptIndex", ReceiptIndexEntry), assignmentStore, progress);
  const projectionStore = (await store("projections", ProjectionRecord)).observeWrites((_previous, next) =>
    metrics.projectionStored(next.context_preview.truncated),
  );
  const maxMessageBytes = () => nc.info?.max_payload ?? DEFAULT_MAX_PAYLOAD;
  const projections = new ProjectionStore(projectionStore, receiptLog, options.storeLayout, maxMessageBytes);
  const tasks = new BackgroundTasks(runStore, assignmentStore, watchlist, log);
  const processor = new ReceiptProcessor({
    runs: runStore,
    assignments: assignmentStore,
    index,
    progress,
    events,
    projections,
    watchlist,
    tasks,
    log,
    dedupWindowMs: await receiptsDedupWindowMs(jsm),
    metrics,
  });
  const taskCancel = new TaskCancelService(assignmentStore, control);
  const compensation = new CompensationService(assignmentStore, dispatcher, watchlist, options.dispatchGraceMs);

  const refuse = (refusal: Refusal): RequestRefused => ({ status: "refused", ...refusal });
  const refusal = (reply: { status: string; code?: RequestRefused["code"]; reason?: string }) =>
    reply.status === "refused" && reply.code ? { code: reply.code, reason: reply.reason ?? "" } : undefined;
  const serve = { log, metrics };
  const subscriptions: Subscription[] = [
    serveRequests(nc, {
      ...serve,
      subject: subjects.claim("*", "*"),
      schema: ClaimRequest,
      // The receipt consumer keeps a claim's receipts in order: its executor may send them ahead of
      // their answers, and a read's first ones as one message.
      replyHeaders: markTakesChains(receiptOrderHeaders()),
      handle: async (origin, req): Promise<ClaimReply> => {
        const reply = await claims.claim(origin, req);
        metrics.claimAnswered(reply.status === "granted" ? "granted" : reply.code);
        return reply;
      },
      refuse,
      refusalOf: refusal,
    }),
    serveRequests(nc, {
      ...serve,
      subject: subjects.presence("*", "*"),
      schema: PresenceHeartbeat,
      handle: (origin, beat) => presence.heartbeat(origin, beat),
      refuse: (refusal): PresenceReply => ({ ...refuse(refusal), ttl_ms: presence.ttlMs }),
      refusalOf: refusal,
    }),
    serveRequests(nc, {
      ...serve,
      subject: subjects.heldClaims("*", "*"),
      schema: HeldClaimsReport,
      handle: (origin, report): Promise<HeldClaimsReply> => heldClaims.report(origin, report),
      refuse,
      refusalOf: refusal,
    }),
    serveRequests(nc, {
      ...serve,
      subject: subjects.receiptQuery("*", "*"),
      schema: ReceiptQuery,
      handle: (_origin, query): Promise<ReceiptQueryReply> => index.answerQuery(query),
      refuse,
      // A conflict found by the query is as much a refusal as one found by the receipt consumer.
      refusalOf: (reply) =>
        reply.status === "rejected" && reply.code === "receipt_conflict" ? { code: reply.code, reason: reply.reason ?? "" } : refusal(reply),
    }),
    serveRequests(nc, {
      ...serve,
      subject: subjects.controlQuery("*", "*"),
      schema: ControlQuery,
      handle: ({ scope, executorId }, query): Promise<ControlQueryResult> => control.since(scope, executorId, query.since),
      refuse,
      refusalOf: (reply) => ("status" in reply ? refusal(reply) : undefined),
    }),
  ];
  const consumer = new ReceiptConsumer(nc, js, processor, log, metrics, options.receiptConcurrency, options.receiptLookAgainMs);
  await consumer.start();
  const requests = new ControlRequestConsumer(js, taskCancel, compensation, log);
  await requests.start();
  const runs = new RunService(runStore, assignmentStore, candidates, config, control, watchlist, options.dispatchGraceMs, log);
  const sweeper = new LeaseSweeper(
    assignmentStore,
    watchlist,
    dispatcher,
    candidates,
    presence,
    detacher,
    tasks,
    runs,
    assignmentEvents,
    log,
    options.sweepIntervalMs,
  );
  sweeper.start();
  const anchor = new CandidateAnchor(candidates, log);
  anchor.start();

  return {
    options,
    runs,
    toolCalls: new ToolCallService(runStore, assignmentStore, config, dispatcher, watchlist, maxMessageBytes),
    history: new HistoryReader(assignmentStore, projections, progress),
    events,
    taskCancel,
    compensation,
    settlement: new OperatorSettlement(runStore, assignmentStore, js, projections, tasks),
    detach: new OperatorDetach(presence, detacher, control),
    sweeper,
    async stop() {
      for (const sub of subscriptions) sub.unsubscribe();
      await sweeper.stop();
      await anchor.stop();
      await requests.stop();
      await consumer.stop();
      // After the consumer: the receipts it finished may have left watch releases in flight.
      await watchlist.settled();
      // Last: every write before may have left run events in its record for later.
      await assignmentEvents.close();
      presenceView.stop();
    },
  };
}
