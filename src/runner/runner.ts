import type { NatsConnection } from "@nats-io/transport-node";
import { z } from "zod";
import { detachedAny, HELD_CLAIMS_MAX, Id, type Candidate, type Grant } from "../wire/messages.js";
import type { ReceiptTerms } from "../wire/receipt-chains.js";
import type { NatsClientEnv } from "../nats/client-options.js";
import { CandidatePuller } from "./candidates.js";
import { ClaimExecution, type ExecutionHost, type RegisteredTool } from "./claim-execution.js";
import { CLOCK_SKEW_MS, ControlMessages } from "./control.js";
import { nextRunnerState, RUNNER_STATE_RULES, runnerAllows, type RunnerEvent, type RunnerState } from "./lifecycle.js";
import { errorText, runnerLogger, type Logger } from "./logger.js";
import { NatsLink } from "./nats-link.js";
import { Outbox } from "./outbox.js";
import { answerChange, FINAL_PHASES, type Phase } from "./phases.js";
import { Presence } from "./presence.js";
import type { FinalReport } from "./receipts.js";
import { SqliteRunnerStore } from "./sqlite-store.js";
import type { LocalAssignment, OutboxReceipt, PhaseChange, RunnerStore, StoredAnswer } from "./store.js";
import { RunnerTasks } from "./tasks.js";
import { toolGrant, type Authorize, type ReconcileOutcome, type ToolDefinition, type ToolGrant } from "./tools.js";
import { Notifier, sleep } from "./wait.js";

const DAY_MS = 86_400_000;

/** The store is pruned this often at most (and at start), a batch of claims at a time. */
const PRUNE_INTERVAL_MS = 3_600_000;
const PRUNE_BATCH = 200;

/** Timing knobs, all in milliseconds. */
const Timing = z
  .object({
    /** Claim, presence and receipt-query requests. */
    requestTimeoutMs: z.number().int().positive().default(5_000),
    /** Wait for a receipt's answer before querying and resending. */
    answerTimeoutMs: z.number().int().positive().default(5_000),
    /** Resend back-off ceiling. */
    maxResendIntervalMs: z.number().int().positive().default(60_000),
    /**
     * How long a progress report waits for the claim's next receipt before it is sent alone, under a
     * gateway that keeps receipts sent ahead in order: a report and the final receipt that follows it
     * within this time go out together, and the gateway applies them in one write. 0: at once.
     */
    progressLingerMs: z.number().int().nonnegative().default(5),
    /**
     * How long a read's `accepted` waits for the read's outcome before it is sent alone, under a
     * gateway that keeps receipts sent ahead in order (the read runs meanwhile): a read done within
     * this time sends `accepted`, its report and its outcome together, and the gateway applies them
     * in one write. A read's outcome does not wait for `accepted`'s answer, so this delays no
     * result, only the claim's `running` as others see it; a read that returns a submission sends
     * `accepted` at once (its task waits for the confirmation). 0: at once.
     */
    acceptedLingerMs: z.number().int().nonnegative().default(20),
    /** Presence heartbeat interval; by default a third of the TTL the gateway announces. */
    heartbeatIntervalMs: z.number().int().positive().optional(),
    /** How long one pull waits for candidates (JetStream's minimum is 1 s). */
    pullExpiresMs: z.number().int().min(1_000).default(5_000),
    /** A candidate this executor cannot take is redelivered to the scope after this delay. */
    releaseDelayMs: z.number().int().nonnegative().default(1_000),
    /** How long the store keeps a claim after it settled (for `runner.assignment`); older ones are deleted. Default 7 days. */
    retainSettledMs: z
      .number()
      .int()
      .positive()
      .default(7 * DAY_MS),
  })
  .strict();
type Timing = z.output<typeof Timing>;

export type ToolRunnerOptions<Tools extends Record<string, unknown> = Record<string, unknown>> = z.input<typeof Timing> & {
  /**
   * NATS server(s); or pass a connection of your own in `nc` (the runner then never closes it; give
   * it `inboxPrefix: executorInboxPrefix(scope, executorId)`, the only inbox NATS lets it read).
   */
  natsUrl?: string | string[];
  nc?: NatsConnection;
  /**
   * NATS credentials and TLS for the runner's own connection (none by default: the runner reads no
   * environment; `natsClientEnv()` gives the NATS_* variables' settings).
   */
  credentials?: NatsClientEnv;
  /** This executor's id: stable across restarts (the store and the outbox are bound to it). */
  executorId: string;
  /** The executor scope its bindings are registered in. */
  scope: string;
  /** Durable store, or the path of the default SQLite file. */
  store: RunnerStore | string;
  /** The product's per-call permission check; runs after the digest check, before `accepted`. */
  authorize: Authorize;
  /** The tools this executor serves, by name (each type parameter: its arguments). */
  tools: { [Name in keyof Tools]: ToolDefinition<Tools[Name]> };
  logger?: Logger;
  /** Claims held at once (claimed, running or reporting). Default 16. */
  maxConcurrent?: number;
  /** Whether the tools can run from the start (`setReady`); default true. */
  ready?: boolean;
};

/**
 * The executor SDK: connects to the gateway over NATS, claims the candidates of its registered tools,
 * runs their handlers behind the grant/accepted handshake, and delivers their receipts through a
 * durable outbox. Made by `await ToolRunner.start(options)`; see docs/runner.md.
 *
 * It holds the lifecycle (the table in `lifecycle.ts`) and the claims in flight; one claim's work is
 * a `ClaimExecution`, pulling and claiming a `CandidatePuller`, presence a `Presence`, control
 * messages `ControlMessages`.
 */
export class ToolRunner {
  /** Submitted tasks: report their progress and outcome here by task reference (docs/async-tasks.md). */
  readonly tasks: RunnerTasks;
  private state: RunnerState = "starting";
  /** The product's word that its tools can run now (`setReady`); while false nothing is claimed. */
  private ready: boolean;
  private readonly active = new Map<string, ClaimExecution>();
  private readonly changed = new Notifier();
  private readonly stopLoops = new AbortController();
  private readonly outbox: Outbox;
  private readonly presence: Presence;
  private readonly puller: CandidatePuller;
  private readonly control: ControlMessages;
  private readonly host: ExecutionHost;
  private readonly startedAt = Date.now();
  private loops: Promise<void>[] = [];
  private closing: Promise<void> | undefined;

  private constructor(
    private readonly options: ToolRunnerOptions,
    private readonly timing: Timing,
    private readonly logger: Logger,
    private readonly store: RunnerStore,
    private readonly tools: ReadonlyMap<string, RegisteredTool>,
    private readonly link: NatsLink,
  ) {
    this.ready = options.ready ?? true;
    this.outbox = new Outbox(store, link, timing, logger, (receipt, answer) => this.onAnswered(receipt, answer));
    this.tasks = new RunnerTasks(
      () => {
        if (this.state === "closed") throw new Error("the runner is closed");
        return this.outbox;
      },
      logger,
      toolGrant,
      (grant) => tools.get(grant.tool_name)?.cancelTask,
    );
    this.host = {
      store,
      outbox: this.outbox,
      tasks: this.tasks,
      logger,
      authorize: options.authorize,
      takesClaims: () => this.state === "running" && this.ready,
      startsHandlers: () => RUNNER_STATE_RULES[this.state].startsHandlers,
      closed: () => this.state === "closed",
      released: (execution) => this.release(execution),
    };
    this.presence = new Presence(
      link,
      logger,
      timing.heartbeatIntervalMs,
      () => ({
        executor_id: this.executorId,
        scope: options.scope,
        bindings: [...new Set([...tools.values()].map((t) => t.bindingId))],
        status: this.state === "running" && this.ready ? "online" : "detaching",
        in_flight: this.active.size,
      }),
      () => this.changed.notify(),
    );
    this.puller = new CandidatePuller({
      link,
      logger,
      executorId: options.executorId,
      presence: this.presence,
      changed: this.changed,
      timing,
      maxConcurrent: options.maxConcurrent ?? 16,
      pulls: () => RUNNER_STATE_RULES[this.state].pulls,
      ready: () => this.ready,
      held: () => this.active.size,
      toolFor: (candidate) => this.toolFor(candidate),
      take: (grant, candidate, tool, terms) => this.take(grant, candidate, tool, terms),
    });
    this.control = new ControlMessages({
      link,
      logger,
      executorId: options.executorId,
      startedAt: this.startedAt,
      abort: (id, reason) => this.active.get(id)?.abort(reason),
      stopTask: (id, kind, reason) => void this.tasks.stop(id, kind, reason),
      detach: () => void this.detach(),
    });
  }

  /**
   * Opens the store, connects, resumes what the store holds (resends, reconciliation reports,
   * handlers confirmed but never started), then keeps presence alive and pulls candidates. Resolves
   * with the running runner; a start that fails closes what it opened.
   */
  static async start<Tools extends Record<string, unknown>>(options: ToolRunnerOptions<Tools>): Promise<ToolRunner> {
    const {
      natsUrl,
      nc,
      credentials,
      executorId,
      scope,
      store: storeOption,
      authorize: _a,
      tools: definitions,
      logger: given,
      maxConcurrent: _m,
      ready: _r,
      ...timingOptions
    } = options;
    Id.parse(executorId);
    Id.parse(scope);
    const timing = Timing.parse(timingOptions);
    const tools = registeredTools(definitions as Record<string, ToolDefinition<unknown>>);
    const logger = given ?? runnerLogger();
    const store = typeof storeOption === "string" ? new SqliteRunnerStore(storeOption) : storeOption;
    let link: NatsLink | undefined;
    try {
      await store.open(executorId);
      link = await NatsLink.open({
        ...(natsUrl ? { natsUrl } : {}),
        ...(nc ? { nc } : {}),
        scope,
        executorId,
        requestTimeoutMs: timing.requestTimeoutMs,
        logger,
        credentials: credentials ?? {},
      });
    } catch (err) {
      await store.close().catch(() => undefined);
      throw err;
    }
    const runner = new ToolRunner(options as ToolRunnerOptions, timing, logger, store, tools, link);
    let resumeHeld: () => Promise<void>;
    try {
      resumeHeld = await runner.resume();
    } catch (err) {
      await runner.close({ deadlineMs: 0 }).catch(() => undefined);
      throw err;
    }
    // After the caller has the runner: a handler or hook this calls may use it (`runner.tasks`).
    setImmediate(() => void resumeHeld());
    return runner;
  }

  get executorId(): string {
    return this.options.executorId;
  }

  /**
   * Settles a `reconciliation_required` assignment with the outcome the product established in its
   * own system. Resolves once the receipt is saved; the outbox delivers it.
   */
  async reconcile(assignmentId: string, outcome: ReconcileOutcome): Promise<void> {
    if (this.state === "closed") throw new Error("the runner is closed");
    const local = await this.store.getAssignment(assignmentId);
    if (!local) throw new Error(`assignment ${assignmentId} is not held by executor ${this.executorId}`);
    if (local.phase !== "awaiting_reconciliation") throw new Error(`assignment ${assignmentId} is ${local.phase}, not awaiting_reconciliation`);
    const report: FinalReport = outcome.kind === "failed" ? { kind: "failed", error: { code: outcome.code, message: outcome.message } } : outcome;
    await this.hold(local.grant, { phase: local.phase }).reconcile(report);
  }

  /**
   * Says whether this executor's tools can run now (say, the service behind them is down and being
   * restarted). While not ready it claims nothing and its presence says `detaching`, so the gateway
   * offers new work elsewhere and hands its unconfirmed claims back; confirmed work stays with it.
   * Ready again: presence `online`, pulling resumes.
   */
  setReady(ready: boolean): void {
    if (this.ready === ready) return;
    this.ready = ready;
    this.logger.info({ executor_id: this.executorId, ready }, ready ? "executor ready" : "executor not ready: claiming nothing until ready again");
    this.changed.notify();
    if (this.state === "running") void this.presence.beat();
  }

  /** Assignments waiting for `reconcile`, oldest first. */
  async reconciliations(): Promise<ToolGrant[]> {
    const open = await this.store.listOpen();
    return open.filter((a) => a.phase === "awaiting_reconciliation").map((a) => toolGrant(a.grant));
  }

  /** The local record of an assignment (latest claim) and its receipts with their answers. */
  async assignment(assignmentId: string): Promise<{ phase: Phase; receipts: OutboxReceipt[] } | undefined> {
    const local = await this.store.getAssignment(assignmentId);
    return local && { phase: local.phase, receipts: await this.store.listReceipts(local) };
  }

  /**
   * Leaves cleanly: stops pulling, announces `detaching` (the gateway returns unconfirmed claims to
   * the candidates; their `accepted` is refused), and resolves once confirmed work has finished and
   * been answered. Presence then lapses; `reconcile` keeps working until `close`.
   */
  async detach(): Promise<void> {
    if (this.state === "running") {
      this.move("detach");
      this.link.stopPulling();
      await this.presence.beat();
    }
    while (this.state === "detaching" && (this.active.size > 0 || this.puller.inFlight > 0)) await this.changed.wait(1_000);
    if (this.state === "detaching") this.move("drain");
  }

  /**
   * Shuts down (wire it to SIGTERM): stops pulling, announces `detaching`, waits for running handlers
   * up to `deadlineMs`, reports those still running as `reconciliation_required`, gives the outbox
   * what is left of the deadline (at least a second) to deliver, then closes. Whatever is not
   * delivered stays in the store and goes out on the next start. A second call waits for the first.
   */
  close({ deadlineMs = 10_000 }: { deadlineMs?: number } = {}): Promise<void> {
    if (!runnerAllows(this.state, "close")) return this.closing ?? Promise.resolve();
    this.closing = this.shutDown(deadlineMs);
    return this.closing;
  }

  private async shutDown(deadlineMs: number): Promise<void> {
    const until = Date.now() + deadlineMs;
    const wasPulling = this.state === "running";
    this.move("close");
    this.link.stopPulling();
    if (wasPulling) await this.presence.beat();
    const handlers = [...this.active.values()].flatMap((e) => e.running ?? []);
    // The wait ends with the loops (stopLoops below), so its timer does not hold the process open after close.
    await Promise.race([Promise.all(handlers), sleep(deadlineMs, this.stopLoops.signal)]);
    for (const execution of this.active.values()) await execution.reportShutdown(deadlineMs);
    await this.outbox.flush(Math.max(until - Date.now(), 1_000));
    this.move("finish");
    this.stopLoops.abort();
    this.outbox.close();
    this.changed.notify();
    await Promise.all(this.loops);
    await this.link.close();
    await this.store.close();
    this.logger.info({ executor_id: this.executorId }, "tool runner closed");
  }

  private move(event: RunnerEvent): void {
    this.state = nextRunnerState(this.state, event);
  }

  /**
   * Deletes the claims that settled more than `retainSettledMs` ago from the store (when it can),
   * a batch per turn of the event loop so no claim waits behind a long delete, at start and then
   * every `retainSettledMs` or hour, whichever is shorter. Without it the store grows by every claim.
   */
  private async pruneLoop(stop: AbortSignal): Promise<void> {
    const { store, timing } = this;
    if (!store.pruneSettled) return;
    while (!stop.aborted) {
      try {
        let deleted = PRUNE_BATCH;
        while (deleted === PRUNE_BATCH && !stop.aborted) deleted = await store.pruneSettled(Date.now() - timing.retainSettledMs, PRUNE_BATCH);
      } catch (err) {
        this.logger.warn({ err: errorText(err) }, "pruning settled claims from the store failed; retrying later");
      }
      await sleep(Math.min(timing.retainSettledMs, PRUNE_INTERVAL_MS), stop);
    }
  }

  // --- start-up ---------------------------------------------------------------------------------

  /**
   * Tells the gateway, before anything is pulled, which claims the store holds: any other it holds
   * under this id was lost with an earlier store (or its confirmation never became durable), and is
   * detached. A report that gets no answer leaves such claims to the presence's lapse or an operator.
   */
  private async reportHeld(open: readonly LocalAssignment[]): Promise<void> {
    // One awaiting reconciliation is no claim the gateway holds any more (it is `reconciliation_required` there), nor is one over.
    const held = open
      .filter((a) => a.phase !== "awaiting_reconciliation" && !FINAL_PHASES.has(a.phase))
      .map((a) => ({ assignment_id: a.assignmentId, generation: a.generation }));
    if (held.length > HELD_CLAIMS_MAX) {
      this.logger.warn(
        { held: held.length, max: HELD_CLAIMS_MAX },
        "held-claims report not sent: the store holds more open claims than one report may list; a claim the store lost stays with this executor id until its presence lapses or an operator detaches it",
      );
      return;
    }
    try {
      const detached = await this.link.reportHeld({ executor_id: this.executorId, scope: this.options.scope, held });
      if (detachedAny(detached)) this.logger.warn({ ...detached }, "the gateway held claims of this executor that its store does not know: detached from them");
    } catch (err) {
      this.logger.warn(
        { err: errorText(err) },
        "held-claims report not taken: a claim the store lost stays with this executor id until its presence lapses or an operator detaches it (a gateway older than this runner does not answer the report)",
      );
    }
  }

  /**
   * From `starting` to `running`: presence, the held-claims report, then what the store says
   * survived the last process (docs/runner.md, crash-point table). Resolves with the rest, run once
   * `start` has resolved (so no answer, handler or hook can reach the product before it holds the
   * runner): `accepting` / `reporting` are resent (replayed) and continue from the answer;
   * `confirmed` never started its handler (a read's, never marked `running`, may have: it runs
   * again either way), so it starts;
   * `running` may have side effects: a write is reported `reconciliation_required`, never rerun, and
   * a read (no side effects by contract) runs again; then the control messages missed while away
   * are applied.
   */
  private async resume(): Promise<() => Promise<void>> {
    this.link.listen(
      (a) => this.outbox.handleAnswer(a),
      (c) => this.control.apply(c, Date.now()),
    );
    await this.presence.beat();
    const open = await this.store.listOpen();
    await this.reportHeld(open);
    // What an earlier process saved goes out first, ahead of anything sent for its claim from now on:
    // every claim's saved receipts are queued before any claim continues (a held task's report, say,
    // must not overtake its own submission).
    const resends: Array<() => void> = [];
    const continuations: Array<() => Promise<void>> = [];
    let resent!: () => void;
    const queued = new Promise<void>((resolve) => (resent = resolve));
    for (const local of open) {
      if (local.phase === "awaiting_reconciliation") continue;
      const receipts = await this.store.listReceipts(local);
      resends.push(() => this.outbox.resume(local.grant, receipts));
      // Over (refused, say) with receipts still unanswered: they are sent, and nothing else happens to it.
      if (FINAL_PHASES.has(local.phase)) continue;
      if (local.phase === "submitted") {
        // Its task runs in the product, not in this process: held for `runner.tasks`, no handler, no slot.
        this.holdTask(local.grant, receipts, queued);
        continue;
      }
      const execution = this.hold(local.grant, { phase: local.phase, restored: receipts });
      this.logger.info({ assignment_id: local.assignmentId, phase: local.phase }, "resuming assignment from the store");
      continuations.push(async () => {
        // `confirmed`: its handler never started (a read's may have: it runs again, as a `running`
        // read does). A `running` write may have had side effects: reported, never run again.
        if (local.phase === "confirmed" || (local.phase === "running" && local.grant.tool_kind === "read")) await execution.start();
        else if (local.phase === "running") await execution.reportRestarted();
      });
    }
    this.move("start");
    this.loops = [
      this.presence.loop(() => RUNNER_STATE_RULES[this.state].heartbeats, this.stopLoops.signal),
      this.puller.loop(this.stopLoops.signal),
      this.pruneLoop(this.stopLoops.signal),
    ];
    this.logger.info({ executor_id: this.executorId, scope: this.options.scope, tools: [...this.tools.keys()] }, "tool runner started");
    return async () => {
      for (const resend of resends) resend();
      resent();
      for (const resume of continuations)
        await resume().catch((err: unknown) =>
          this.logger.error({ err: errorText(err) }, "could not resume a claim from the store; it is resumed on the next start"),
        );
      // What was sent while this executor was down (since its oldest open claim) or disconnected reaches it now.
      await this.control.catchUp(Math.min(this.startedAt, ...open.map((a) => a.createdAt)) - CLOCK_SKEW_MS);
      this.link.onReconnect((lost) => void this.control.catchUp(lost - CLOCK_SKEW_MS));
    };
  }

  /** Holds the task of a claim whose submission is saved (found among its receipts); its reports wait until `queued` (its saved receipts queued again). */
  private holdTask(grant: Grant, receipts: readonly OutboxReceipt[], queued: Promise<void>): void {
    const saved = receipts.find((r) => r.kind === "submission")?.body as { task_ref: string; status: string } | undefined;
    if (saved) this.tasks.hold(grant, saved, receipts, queued);
    else this.logger.error({ assignment_id: grant.assignment_id }, "submitted assignment without its submission receipt in the store");
  }

  // --- claims -----------------------------------------------------------------------------------

  /**
   * The tool a candidate is for, when this executor takes it now. One durable consumer serves the
   * whole scope: a candidate for a binding or tool another executor of the scope serves goes back.
   */
  private toolFor(candidate: Candidate): RegisteredTool | undefined {
    const tool = this.tools.get(candidate.tool_name);
    if (!tool || tool.bindingId !== candidate.binding_id || this.state !== "running" || !this.ready || this.active.has(candidate.assignment_id))
      return undefined;
    return tool;
  }

  private async take(grant: Grant, candidate: Candidate, tool: RegisteredTool, terms: ReceiptTerms): Promise<void> {
    if (
      grant.assignment_id !== candidate.assignment_id ||
      grant.executor_id !== this.executorId ||
      grant.tool_name !== candidate.tool_name ||
      grant.binding_id !== candidate.binding_id
    ) {
      // Not a grant for what was asked: nothing of it can be trusted, not even to refuse it. The
      // gateway's lease returns the claim to the candidates.
      this.logger.error({ assignment_id: candidate.assignment_id, granted: grant.assignment_id }, "grant does not match the claim request; ignored");
      return;
    }
    if (terms.ordersReceipts) this.outbox.sendAheadFor(grant);
    if (terms.takesChains) this.outbox.sendChainsFor(grant);
    const execution = this.hold(grant, { tool });
    if (!(await execution.accept())) this.release(execution);
  }

  /** Takes a slot for a claim (a new one, one resumed from the store, or one being reconciled). */
  private hold(
    grant: Grant,
    {
      tool = this.tools.get(grant.tool_name),
      phase = "accepting",
      restored,
    }: { tool?: RegisteredTool | undefined; phase?: Phase; restored?: readonly OutboxReceipt[] } = {},
  ): ClaimExecution {
    const execution = new ClaimExecution(this.host, grant, tool, phase, restored);
    this.active.set(grant.assignment_id, execution);
    return execution;
  }

  private release(execution: ClaimExecution): void {
    if (this.active.get(execution.assignmentId) === execution) this.active.delete(execution.assignmentId);
    this.changed.notify();
  }

  /**
   * The definitive answer to a receipt: saved with the phase change it makes, then handed to the
   * claim's execution. The change applies to the latest local claim only; the execution held here is
   * that claim, so the store is read only for a receipt of a claim not held (a submitted task's).
   */
  private async onAnswered(receipt: OutboxReceipt, answer: StoredAnswer): Promise<void> {
    const execution = this.active.get(receipt.assignmentId);
    let change: PhaseChange | undefined;
    if (execution) change = execution.answerChange(receipt, answer.status);
    else {
      const local = await this.store.getAssignment(receipt.assignmentId);
      change = local?.generation === receipt.generation ? answerChange(receipt.kind, answer.status, local.phase) : undefined;
    }
    await this.store.recordAnswer(receipt.receiptId, answer, change);
    // The same id with another body: this executor's store or code changed a saved receipt. Never resent with a new body.
    if (answer.code === "receipt_conflict")
      this.logger.error(
        answerLog(receipt, answer),
        "receipt_conflict: the gateway holds another body under this receipt id (a bug in this executor or its store); not retried",
      );
    else if (answer.status === "rejected") this.logger.warn(answerLog(receipt, answer), "receipt rejected by the gateway");
    else this.logger.debug(answerLog(receipt, answer), "receipt answered");
    // A task submitted into an ended run: the product may stop it; what it reports later is late.
    // (Not awaited: the product's hook must not hold up the claim's outbox lane.)
    if (answer.code === "run_terminated" && receipt.kind === "submission") void this.tasks.stop(receipt.assignmentId, "run_cancelled", "the run is terminated");
    await execution?.answered(receipt, answer, change);
  }
}

function answerLog(receipt: OutboxReceipt, answer: StoredAnswer): object {
  return { receipt_id: receipt.receiptId, kind: receipt.kind, status: answer.status, code: answer.code, reason: answer.reason };
}

/** The tools by name, each checked as `ToolRunner.start` takes it. */
function registeredTools(definitions: Record<string, ToolDefinition<unknown>>): Map<string, RegisteredTool> {
  const tools = new Map<string, RegisteredTool>();
  for (const [name, definition] of Object.entries(definitions)) {
    Id.parse(definition.bindingId);
    if (definition.kind !== "read" && definition.kind !== "write") throw new Error(`tool '${name}': kind must be "read" or "write"`);
    if (definition.compensate && definition.kind !== "write") throw new Error(`tool '${name}': only a write tool has something to compensate`);
    tools.set(name, { ...definition, name });
  }
  if (tools.size === 0) throw new Error("a runner needs at least one tool");
  return tools;
}
