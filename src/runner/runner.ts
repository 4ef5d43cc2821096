import type { NatsConnection } from "@nats-io/transport-node";
import { z } from "zod";
import { argumentDigest } from "../wire/digest.js";
import { Id, type Candidate, type ExecutorControl, type Grant, type RefusalCode } from "../wire/messages.js";
import { defaultLogger, errorText, type Logger } from "./logger.js";
import { natsClientEnv, type NatsClientEnv } from "../nats/client-options.js";
import { NatsLink, type CandidateDelivery } from "./nats-link.js";
import { describeError, finalReceipt, reportOf } from "./outcome.js";
import type { RunnerError } from "../errors/protocol-codes.js";
import { Outbox } from "./outbox.js";
import { answerChange, transition, type Phase } from "./phases.js";
import { ProgressReporter } from "./progress.js";
import { buildReceipt, type FinalReport } from "./receipts.js";
import { SqliteRunnerStore } from "./sqlite-store.js";
import { PhaseConflictError, type LocalAssignment, type OutboxReceipt, type RunnerStore, type StoredAnswer } from "./store.js";
import { RunnerTasks } from "./tasks.js";
import { CancelRequested, isSubmission, submission, type Authorize, type ReconcileOutcome, type Submission, type ToolDefinition, type ToolGrant } from "./tools.js";
import { Notifier, sleep } from "./wait.js";

/** Timing knobs, all in milliseconds. */
const Timing = z
  .object({
    /** Claim, presence and receipt-query requests. */
    requestTimeoutMs: z.number().int().positive().default(5_000),
    /** Wait for a receipt's answer before querying and resending. */
    answerTimeoutMs: z.number().int().positive().default(5_000),
    /** Resend back-off ceiling. */
    maxResendIntervalMs: z.number().int().positive().default(60_000),
    /** Presence heartbeat interval; by default a third of the TTL the gateway announces. */
    heartbeatIntervalMs: z.number().int().positive().optional(),
    /** How long one pull waits for candidates (JetStream's minimum is 1 s). */
    pullExpiresMs: z.number().int().min(1_000).default(5_000),
    /** A candidate this executor cannot take is redelivered to the scope after this delay. */
    releaseDelayMs: z.number().int().nonnegative().default(1_000),
  })
  .strict();
type Timing = z.output<typeof Timing>;

export type ToolRunnerOptions = z.input<typeof Timing> & {
  /**
   * NATS server(s); or pass a connection of your own in `nc` (the runner then never closes it; give
   * it `inboxPrefix: executorInboxPrefix(scope, executorId)`, the only inbox NATS lets it read).
   */
  natsUrl?: string | string[];
  nc?: NatsConnection;
  /** NATS credentials and TLS for the runner's own connection; default: the NATS_* environment variables. */
  credentials?: NatsClientEnv;
  /** This executor's id: stable across restarts (the store and the outbox are bound to it). */
  executorId: string;
  /** The executor scope its bindings are registered in. */
  scope: string;
  /** Durable store, or the path of the default SQLite file. */
  store: RunnerStore | string;
  /** The product's per-call permission check; runs after the digest check, before `accepted`. */
  authorize: Authorize;
  logger?: Logger;
  /** Claims held at once (claimed, running or reporting). Default 16. */
  maxConcurrent?: number;
};

type RunnerState = "idle" | "running" | "detaching" | "detached" | "closing" | "closed";

interface RegisteredTool extends ToolDefinition<unknown> {
  name: string;
}

/** One claim this process is working on, from the grant until its outcome is answered. */
interface ActiveClaim {
  grant: Grant;
  abort: AbortController;
  /** Set while the handler runs, with the phase it runs in (its outcome's compare-and-set starts there). */
  handler?: { done: Promise<void>; phase: "confirmed" | "running" };
}

/** How far the server's clock (a control message's time) may differ from this process's. */
const CLOCK_SKEW_MS = 5_000;

/**
 * Refusals that say this executor may not claim now at all (offline, or not as registered): it stops
 * pulling until a heartbeat is answered `ok` again, and the candidate goes back for another executor.
 */
const STOP_PULLING_REFUSALS: ReadonlySet<RefusalCode> = new Set(["executor_offline", "executor_unknown", "out_of_scope", "identity_mismatch", "binding_not_granted"]);

/** A claim refusal worth another try later (the candidate goes back to the scope). */
const RETRYABLE_CLAIM_REFUSALS: ReadonlySet<RefusalCode> = new Set([...STOP_PULLING_REFUSALS, "too_many_claims"]);

/**
 * The executor SDK: connects to the gateway over NATS, claims the candidates of its registered tools,
 * runs their handlers behind the grant/accepted handshake, and delivers their receipts through a
 * durable outbox. See docs/runner.md.
 */
export class ToolRunner {
  private readonly timing: Timing;
  private readonly logger: Logger;
  private readonly store: RunnerStore;
  private readonly tools = new Map<string, RegisteredTool>();
  /** Submitted tasks: report their progress and outcome here by task reference (docs/async-tasks.md). */
  readonly tasks: RunnerTasks;
  private readonly active = new Map<string, ActiveClaim>();
  private readonly changed = new Notifier();
  private readonly stopLoops = new AbortController();
  private state: RunnerState = "idle";
  private claiming = 0;
  private online = false;
  /** The product's word that its tools can run now (`setReady`); while false nothing is claimed. */
  private ready = true;
  private heartbeatIntervalMs = 1_000;
  private link!: NatsLink;
  private outbox!: Outbox;
  private loops: Promise<void>[] = [];
  private startedAt = 0;

  constructor(private readonly options: ToolRunnerOptions) {
    Id.parse(options.executorId);
    Id.parse(options.scope);
    const { natsUrl: _u, nc: _n, credentials: _c, executorId: _e, scope: _s, store, authorize: _a, logger, maxConcurrent: _m, ...timing } = options;
    this.timing = Timing.parse(timing);
    this.logger = logger ?? defaultLogger();
    this.store = typeof store === "string" ? new SqliteRunnerStore(store) : store;
    const outbox = () => {
      this.assertConnected();
      return this.outbox;
    };
    this.tasks = new RunnerTasks(outbox, this.logger, toolGrant, (grant) => this.tools.get(grant.tool_name)?.cancelTask);
  }

  get executorId(): string {
    return this.options.executorId;
  }

  /** Registers a tool; all tools are registered before `start`. */
  tool<A>(name: string, definition: ToolDefinition<A>): this {
    if (this.state !== "idle") throw new Error("register tools before start()");
    if (this.tools.has(name)) throw new Error(`tool '${name}' is already registered`);
    Id.parse(definition.bindingId);
    if (definition.kind !== "read" && definition.kind !== "write") throw new Error(`tool '${name}': kind must be "read" or "write"`);
    if (definition.compensate && definition.kind !== "write") throw new Error(`tool '${name}': only a write tool has something to compensate`);
    this.tools.set(name, { ...(definition as ToolDefinition<unknown>), name });
    return this;
  }

  /**
   * Opens the store, connects, resumes what the store holds (resends, reconciliation reports,
   * handlers confirmed but never started), then keeps presence alive and pulls candidates.
   */
  async start(): Promise<void> {
    if (this.state !== "idle") throw new Error(`cannot start a runner that is ${this.state}`);
    if (this.tools.size === 0) throw new Error("register at least one tool before start()");
    this.state = "running";
    await this.store.open(this.executorId);
    const { natsUrl, nc, scope, executorId } = this.options;
    this.link = await NatsLink.open({ ...(natsUrl ? { natsUrl } : {}), ...(nc ? { nc } : {}), scope, executorId, requestTimeoutMs: this.timing.requestTimeoutMs, logger: this.logger, credentials: this.options.credentials ?? natsClientEnv() });
    this.outbox = new Outbox(this.store, this.link, this.timing, this.logger, (receipt, answer) => this.onAnswered(receipt, answer));
    this.startedAt = Date.now();
    this.link.listen(
      (a) => this.outbox.handleAnswer(a),
      (c) => this.onControl(c, Date.now()),
    );
    await this.heartbeat();
    const open = await this.store.listOpen();
    await this.recover(open);
    // What was sent while this executor was down (since its oldest open claim) or disconnected reaches it now.
    await this.catchUpControl(Math.min(this.startedAt, ...open.map((a) => a.createdAt)) - CLOCK_SKEW_MS);
    this.link.onReconnect((lost) => void this.catchUpControl(lost - CLOCK_SKEW_MS));
    this.loops = [this.presenceLoop(), this.pullLoop()];
    this.logger.info({ executor_id: executorId, scope, tools: [...this.tools.keys()] }, "tool runner started");
  }

  /**
   * Settles a `reconciliation_required` assignment with the outcome the product established in its
   * own system. Resolves once the receipt is saved; the outbox delivers it.
   */
  async reconcile(assignmentId: string, outcome: ReconcileOutcome): Promise<void> {
    this.assertConnected();
    const local = await this.store.getAssignment(assignmentId);
    if (!local) throw new Error(`assignment ${assignmentId} is not held by executor ${this.executorId}`);
    if (local.phase !== "awaiting_reconciliation") throw new Error(`assignment ${assignmentId} is ${local.phase}, not awaiting_reconciliation`);
    const report: FinalReport =
      outcome.kind === "failed" ? { kind: "failed", error: { code: outcome.code, message: outcome.message } } : outcome;
    this.track(local.grant);
    await this.outbox.append(local.grant, buildReceipt(local.grant, report, Date.now()), transition("awaiting_reconciliation", "reconcile"));
  }

  /**
   * Says whether this executor's tools can run now (say, the service behind them is down and being
   * restarted). While not ready it claims nothing and its presence says `detaching`, so the gateway
   * offers new work elsewhere and hands its unconfirmed claims back; confirmed work stays with it.
   * Ready again: presence `online`, pulling resumes. A runner starts ready.
   */
  setReady(ready: boolean): void {
    if (this.ready === ready) return;
    this.ready = ready;
    this.logger.info({ executor_id: this.executorId, ready }, ready ? "executor ready" : "executor not ready: claiming nothing until ready again");
    this.changed.notify();
    if (this.state === "running") void this.heartbeat();
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
      this.state = "detaching";
      this.link.stopPulling();
      await this.heartbeat();
    }
    while (this.state === "detaching" && (this.active.size > 0 || this.claiming > 0)) await this.changed.wait(1_000);
    if (this.state === "detaching") this.state = "detached";
  }

  /**
   * Shuts down (wire it to SIGTERM): stops pulling, announces `detaching`, waits for running handlers
   * up to `deadlineMs`, reports those still running as `reconciliation_required`, gives the outbox
   * what is left of the deadline (at least a second) to deliver, then closes. Whatever is not
   * delivered stays in the store and goes out on the next start.
   */
  async close({ deadlineMs = 10_000 }: { deadlineMs?: number } = {}): Promise<void> {
    if (this.state === "idle" || this.state === "closed" || this.state === "closing") {
      this.state = "closed";
      return;
    }
    const until = Date.now() + deadlineMs;
    const wasPulling = this.state === "running";
    this.state = "closing";
    this.link.stopPulling();
    if (wasPulling) await this.heartbeat();
    const handlers = [...this.active.values()].flatMap((c) => (c.handler ? [c.handler.done] : []));
    // The wait ends with the loops (stopLoops below), so its timer does not hold the process open after close.
    await Promise.race([Promise.all(handlers), sleep(deadlineMs, this.stopLoops.signal)]);
    for (const claim of this.active.values()) {
      if (!claim.handler) continue;
      claim.abort.abort(new CancelRequested("shutdown", "the executor is shutting down"));
      const error: RunnerError = { code: "executor_shutdown", message: `the handler was still running ${deadlineMs} ms after shutdown began; its outcome is unknown` };
      await this.report(claim.grant, finalReceipt(claim.grant, { kind: "reconciliation_required", error }, Date.now()), claim.handler.phase);
    }
    await this.outbox.flush(Math.max(until - Date.now(), 1_000));
    this.state = "closed";
    this.stopLoops.abort();
    this.outbox.close();
    this.changed.notify();
    await Promise.all(this.loops);
    await this.link.close();
    await this.store.close();
    this.logger.info({ executor_id: this.executorId }, "tool runner closed");
  }

  // --- start-up ---------------------------------------------------------------------------------

  /**
   * What the store says survived the last process (docs/runner.md, crash-point table):
   * `accepting`/`reporting` are resent (replayed) and continue from the answer; `confirmed` never
   * started its handler (a read's, never marked `running`, may have: it runs again either way), so
   * it starts now; `running` may have side effects: a write is reported `reconciliation_required`,
   * never rerun; a read (no side effects by contract) runs again.
   */
  private async recover(open: readonly LocalAssignment[]): Promise<void> {
    for (const local of open) {
      if (local.phase === "awaiting_reconciliation") continue;
      const receipts = await this.store.listReceipts(local);
      this.outbox.markReplays(receipts);
      if (local.phase === "submitted") {
        // Its task runs in the product, not in this process: held for `runner.tasks`, no handler, no slot.
        this.holdTask(local.grant, receipts);
        this.outbox.kick(local.grant);
        continue;
      }
      this.track(local.grant);
      this.outbox.kick(local.grant);
      this.logger.info({ assignment_id: local.assignmentId, phase: local.phase }, "resuming assignment from the store");
      if (local.phase === "confirmed") await this.startHandler(local.grant, "confirmed", receipts);
      else if (local.phase === "running" && local.grant.tool_kind === "read") await this.startHandler(local.grant, "running", receipts);
      else if (local.phase === "running") {
        const error: RunnerError = { code: "executor_restarted", message: "the executor stopped while the write handler was running; its outcome is unknown" };
        await this.report(local.grant, finalReceipt(local.grant, { kind: "reconciliation_required", error }, Date.now()), "running");
      }
    }
  }

  /**
   * Applies the control messages stored since `since` (a repeat of one already applied is harmless:
   * aborting twice, detaching twice). Unanswered, it is logged: the receipt answers still tell a
   * handler its run ended.
   */
  private async catchUpControl(since: number): Promise<void> {
    try {
      for (let from = since, more = true; more; ) {
        const reply = await this.link.queryControl(from);
        for (const { message, sent_at } of reply.messages) this.onControl(message, sent_at);
        more = reply.more && reply.messages.length > 0;
        from = Math.max(from + 1, reply.messages.at(-1)?.sent_at ?? from);
      }
    } catch (err) {
      this.logger.warn({ err: errorText(err) }, "missed control messages could not be fetched");
    }
  }

  // --- presence and candidates ------------------------------------------------------------------

  private async presenceLoop(): Promise<void> {
    const beating = () => this.state === "running" || this.state === "detaching" || this.state === "closing";
    while (beating()) {
      await sleep(this.heartbeatIntervalMs, this.stopLoops.signal);
      if (beating()) await this.heartbeat();
    }
  }

  private async heartbeat(): Promise<void> {
    try {
      const reply = await this.link.heartbeat({
        executor_id: this.executorId,
        scope: this.options.scope,
        bindings: [...new Set([...this.tools.values()].map((t) => t.bindingId))],
        status: this.state === "running" && this.ready ? "online" : "detaching",
        in_flight: this.active.size,
      });
      this.heartbeatIntervalMs = this.timing.heartbeatIntervalMs ?? Math.max(100, Math.floor(reply.ttl_ms / 3));
      if (reply.status === "refused") this.logger.warn({ code: reply.code, reason: reply.reason }, "presence refused by the gateway");
      this.setOnline(reply.status === "ok");
    } catch (err) {
      // Presence is the gateway's to expire; a missed beat (NATS or gateway away) is retried next interval.
      this.logger.debug({ err: errorText(err) }, "presence heartbeat unanswered");
    }
  }

  private setOnline(online: boolean): void {
    this.online = online;
    if (online) this.changed.notify();
  }

  private async pullLoop(): Promise<void> {
    const maxConcurrent = this.options.maxConcurrent ?? 16;
    while (this.state === "running") {
      const free = maxConcurrent - this.active.size - this.claiming;
      if (!this.online || !this.ready || free <= 0) {
        await this.changed.wait(this.heartbeatIntervalMs);
        continue;
      }
      try {
        for await (const delivery of this.link.pull(free, this.timing.pullExpiresMs)) void this.onCandidate(delivery);
      } catch (err) {
        if (this.state !== "running") return;
        this.logger.warn({ err: errorText(err) }, "candidate pull failed; retrying");
        await sleep(this.timing.pullExpiresMs, this.stopLoops.signal);
      }
    }
  }

  private async onCandidate(delivery: CandidateDelivery): Promise<void> {
    const { candidate } = delivery;
    const tool = this.tools.get(candidate.tool_name);
    // One durable consumer serves the whole scope: a candidate for a binding or tool another
    // executor of the scope serves goes back to it.
    if (!tool || tool.bindingId !== candidate.binding_id || this.state !== "running" || !this.ready || this.active.has(candidate.assignment_id)) {
      delivery.release(this.timing.releaseDelayMs);
      return;
    }
    this.claiming++;
    try {
      const reply = await this.link.claim({ assignment_id: candidate.assignment_id, executor_id: this.executorId, generation: candidate.generation });
      if (reply.status === "refused") {
        const registry = STOP_PULLING_REFUSALS.has(reply.code) && reply.code !== "executor_offline";
        this.logger[registry ? "warn" : "debug"]({ assignment_id: candidate.assignment_id, code: reply.code, reason: reply.reason }, "claim refused");
        if (STOP_PULLING_REFUSALS.has(reply.code)) this.setOnline(false);
        if (RETRYABLE_CLAIM_REFUSALS.has(reply.code)) delivery.release(this.timing.releaseDelayMs);
        else delivery.ack();
        return;
      }
      delivery.ack();
      await this.take(reply.grant, candidate, tool);
    } catch (err) {
      this.logger.warn({ err: errorText(err), assignment_id: candidate.assignment_id }, "claim failed; candidate released");
      delivery.release(this.timing.releaseDelayMs);
    } finally {
      this.claiming--;
      this.changed.notify();
    }
  }

  /**
   * From a grant to `accepted`: check it, ask the product, save the claim with its first receipt,
   * send. A refusal (digest, arguments, authorize, no compensate handler) is saved as a `refused`
   * receipt instead, in the `reporting` phase: no `accepted` is ever sent and no handler ever runs.
   */
  private async take(grant: Grant, candidate: Candidate, tool: RegisteredTool): Promise<void> {
    if (grant.assignment_id !== candidate.assignment_id || grant.executor_id !== this.executorId || grant.tool_name !== candidate.tool_name || grant.binding_id !== candidate.binding_id) {
      // Not a grant for what was asked: nothing of it can be trusted, not even to refuse it. The
      // gateway's lease returns the claim to the candidates.
      this.logger.error({ assignment_id: candidate.assignment_id, granted: grant.assignment_id }, "grant does not match the claim request; ignored");
      return;
    }
    this.track(grant);
    try {
      const refusal = await this.vet(grant, tool);
      if (this.state !== "running" || !this.ready) {
        // Detaching or not ready: the gateway hands this unconfirmed claim back to the candidates.
        this.untrack(grant.assignment_id);
        return;
      }
      const now = Date.now();
      const local: LocalAssignment = { assignmentId: grant.assignment_id, generation: grant.generation, grant, phase: refusal ? "reporting" : "accepting", createdAt: now, updatedAt: now };
      // The digest of the grant vetted above: the gateway refuses `accepted` if it is not the assignment's.
      const first = refusal
        ? buildReceipt(grant, { kind: "refused", error: refusal }, now)
        : buildReceipt(grant, { kind: "accepted", operation_key: grant.operation_key, argument_digest: grant.argument_digest }, now);
      if (refusal) this.logger.warn({ assignment_id: grant.assignment_id, ...refusal }, "grant refused before any side effect");
      await this.store.createAssignment(local, [first]);
      this.outbox.kick(grant);
    } catch (err) {
      this.untrack(grant.assignment_id);
      this.logger.error({ err: errorText(err), assignment_id: grant.assignment_id }, "could not save the claim; it returns to the candidates when its lease expires");
    }
  }

  /** Why a grant must be refused, or undefined when it may be accepted. */
  private async vet(grant: Grant, tool: RegisteredTool): Promise<RunnerError | undefined> {
    if (grant.tool_kind !== tool.kind) return { code: "tool_kind_mismatch", message: `the grant says ${grant.tool_kind}, the executor registered ${tool.kind}` };
    if (grant.compensates && !tool.compensate) return { code: "compensation_unsupported", message: `tool '${tool.name}' has no compensate handler in this executor` };
    let digest: string | undefined;
    try {
      digest = argumentDigest(grant.arguments);
    } catch {
      digest = undefined;
    }
    if (digest !== grant.argument_digest) return { code: "argument_digest_mismatch", message: "the arguments do not match the grant's argument digest" };
    try {
      tool.arguments?.parse(grant.arguments);
    } catch (err) {
      return describeError("invalid_arguments", err);
    }
    try {
      const decision = await this.options.authorize(toolGrant(grant));
      const allowed = typeof decision === "boolean" ? decision : decision.allowed;
      const reason = typeof decision === "object" ? decision.reason : undefined;
      return allowed ? undefined : { code: "authorization_refused", message: reason ?? "refused by the product's authorize hook" };
    } catch (err) {
      return describeError("authorization_error", err);
    }
  }

  // --- answers, handlers, outcomes --------------------------------------------------------------

  private async onAnswered(receipt: OutboxReceipt, answer: StoredAnswer): Promise<void> {
    const local = await this.store.getAssignment(receipt.assignmentId);
    const change = local && local.generation === receipt.generation ? answerChange(receipt.kind, answer.status) : undefined;
    await this.store.recordAnswer(receipt.receiptId, answer, change);
    const log = { receipt_id: receipt.receiptId, kind: receipt.kind, status: answer.status, code: answer.code, reason: answer.reason };
    // The same id with another body: this executor's store or code changed a saved receipt. Never resent with a new body.
    if (answer.code === "receipt_conflict") this.logger.error(log, "receipt_conflict: the gateway holds another body under this receipt id (a bug in this executor or its store); not retried");
    else if (answer.status === "rejected") this.logger.warn(log, "receipt rejected by the gateway");
    else this.logger.debug(log, "receipt answered");
    const claim = this.active.get(receipt.assignmentId);
    // Whatever the answer, learning that the run ended stops the handler (a missed control message included).
    if (answer.code === "run_terminated") claim?.abort.abort(new CancelRequested("run_cancelled", "the run is terminated"));
    // A task submitted into an ended run: the product may stop it; what it reports later is late.
    // (Not awaited: the product's hook must not hold up the claim's outbox lane.)
    if (answer.code === "run_terminated" && receipt.kind === "submission") void this.tasks.stop(receipt.assignmentId, "run_cancelled", "the run is terminated");
    if (!claim || !change) return;
    if (change.to === "confirmed") await this.startHandler(claim.grant, "confirmed", []);
    else if (change.to !== "reporting") this.untrack(receipt.assignmentId);
  }

  /**
   * Runs the handler of a confirmed claim (`from: "confirmed"`), or again for a read interrupted by
   * a crash (`from: "running"`; `saved` continues its progress seq). A write is marked `running`
   * first, durably: after a crash that mark says its side effects may exist. A read has none by
   * contract and runs again after a crash whatever its phase, so it is not marked.
   */
  private async startHandler(grant: Grant, from: "confirmed" | "running", saved: readonly OutboxReceipt[]): Promise<void> {
    const claim = this.active.get(grant.assignment_id);
    // Shutting down: a confirmed claim stays `confirmed` in the store and starts on the next start.
    if (!claim || this.state === "closing" || this.state === "closed") return;
    const tool = this.tools.get(grant.tool_name);
    let args: unknown;
    try {
      if (!tool) throw new Error(`tool '${grant.tool_name}' is not registered in this executor`);
      args = tool.arguments ? tool.arguments.parse(grant.arguments) : grant.arguments;
    } catch (err) {
      await this.report(grant, finalReceipt(grant, { kind: "failed", error: describeError("tool_unavailable", err) }, Date.now()), from);
      return;
    }
    const phase = grant.tool_kind === "write" ? "running" : from;
    if (phase !== from) await this.store.setPhase({ assignmentId: grant.assignment_id, generation: grant.generation }, transition("confirmed", "start"));
    const seq = saved.filter((r) => r.kind === "progress").length + 1;
    const done = this.runHandler(grant, tool, args, claim.abort.signal, new ProgressReporter(grant, this.outbox, seq), phase).finally(() => {
      claim.handler = undefined;
    });
    claim.handler = { done, phase };
  }

  private async runHandler(grant: Grant, tool: RegisteredTool, args: unknown, signal: AbortSignal, progress: ProgressReporter, phase: "confirmed" | "running"): Promise<void> {
    const ctx = { arguments: args, grant: toolGrant(grant), signal, progress: (data: unknown) => progress.report(data), submit: submission };
    const { compensates } = grant;
    // A compensation runs the tool's `compensate` (vetted before `accepted`), never its handler.
    const run = compensates ? () => tool.compensate!({ ...ctx, compensates }) : () => tool.handler(ctx);
    const [outcome] = await Promise.allSettled([(async () => run())()]);
    await progress.close();
    if (outcome!.status === "fulfilled" && isSubmission(outcome.value)) return this.submitTask(grant, outcome.value, phase);
    await this.report(grant, finalReceipt(grant, reportOf(outcome!), Date.now()), phase);
  }

  /**
   * The handler left its business task running: the submission is saved (and sent), the task is held
   * for `runner.tasks`, and the claim's slot is free. A task reference already held here cannot name
   * a second task: the handler may have started one anyway, so that is `reconciliation_required`.
   */
  private async submitTask(grant: Grant, task: Submission, phase: "confirmed" | "running"): Promise<void> {
    const unknown = (error: RunnerError) => this.report(grant, finalReceipt(grant, { kind: "reconciliation_required", error }, Date.now()), phase);
    if (this.state === "closed") return unknown({ code: "executor_shutdown", message: "the handler submitted after the runner closed" }); // logged, not saved
    if (this.tasks.holds(task.task_ref)) return unknown({ code: "task_ref_in_use", message: `task_ref '${task.task_ref}' already names another submitted task of this executor` });
    let receipt: OutboxReceipt;
    try {
      receipt = buildReceipt(grant, { kind: "submission", task_ref: task.task_ref, status: task.status }, Date.now());
    } catch (err) {
      // Not one `ctx.submit` made (it validates): the task may have started, so its outcome is unknown.
      return unknown(describeError("invalid_submission", err));
    }
    try {
      await this.tasks.submitting(task.task_ref, async () => {
        await this.outbox.append(grant, receipt, transition(phase, "submit"));
        this.holdTask(grant, await this.store.listReceipts({ assignmentId: grant.assignment_id, generation: grant.generation }));
      });
    } catch (err) {
      if (!(err instanceof PhaseConflictError)) throw err;
      this.logger.warn({ assignment_id: grant.assignment_id, task_ref: task.task_ref }, "submission ignored: the assignment was already reported");
      return;
    }
    this.untrack(grant.assignment_id);
  }

  /** Holds the task of a claim whose submission is saved (found among its receipts). */
  private holdTask(grant: Grant, receipts: readonly OutboxReceipt[]): void {
    const saved = receipts.find((r) => r.kind === "submission")?.body as { task_ref: string; status: string } | undefined;
    if (saved) this.tasks.hold(grant, saved, receipts);
    else this.logger.error({ assignment_id: grant.assignment_id }, "submitted assignment without its submission receipt in the store");
  }

  /** Saves a final receipt and sends it, unless another outcome was reported first (compare-and-set). */
  private async report(grant: Grant, receipt: OutboxReceipt, from: "confirmed" | "running"): Promise<void> {
    if (this.state === "closed") {
      this.logger.warn({ assignment_id: grant.assignment_id, kind: receipt.kind }, "outcome after close is not saved; the assignment was reported at shutdown");
      return;
    }
    try {
      await this.outbox.append(grant, receipt, transition(from, "report"));
    } catch (err) {
      if (!(err instanceof PhaseConflictError)) throw err;
      this.logger.warn({ assignment_id: grant.assignment_id, kind: receipt.kind }, "outcome ignored: the assignment was already reported");
    }
  }

  private onControl(message: ExecutorControl, sentAt: number): void {
    this.logger.info({ control: message }, "control message");
    switch (message.type) {
      case "run_cancelled":
        for (const id of message.assignment_ids) {
          this.active.get(id)?.abort.abort(new CancelRequested("run_cancelled", `run ${message.run_id} was cancelled`));
          void this.tasks.stop(id, "run_cancelled", `run ${message.run_id} was cancelled`);
        }
        return;
      case "task_cancel_requested":
        this.active.get(message.assignment_id)?.abort.abort(new CancelRequested("task_cancel_requested", message.reason));
        void this.tasks.stop(message.assignment_id, "task_cancel_requested", message.reason);
        return;
      case "detach_requested":
        // Addressed to the process that was running then: a restart is a fresh attach, not a replay of it.
        if (message.executor_id === this.executorId && sentAt >= this.startedAt - CLOCK_SKEW_MS) void this.detach();
        return;
    }
  }

  private track(grant: Grant): void {
    this.active.set(grant.assignment_id, { grant, abort: new AbortController() });
  }

  private untrack(assignmentId: string): void {
    this.active.delete(assignmentId);
    this.changed.notify();
  }

  private assertConnected(): void {
    if (this.state === "idle" || this.state === "closed") throw new Error(`the runner is ${this.state}`);
  }
}

function toolGrant(grant: Grant): ToolGrant {
  const { claim_token: _token, ...rest } = grant;
  return rest;
}
