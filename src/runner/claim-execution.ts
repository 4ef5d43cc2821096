import { argumentDigest } from "../wire/digest.js";
import { rerunTag } from "../wire/receipt-ids.js";
import type { Grant } from "../wire/messages.js";
import type { RunnerError } from "../errors/protocol-codes.js";
import { errorText, type Logger } from "./logger.js";
import { describeError, finalReceipt, reportOf } from "./outcome.js";
import type { Outbox } from "./outbox.js";
import { answerChange, IllegalTransitionError, transition, type Phase, type PhaseEvent } from "./phases.js";
import { ProgressReporter, type AheadOfClaim } from "./progress.js";
import { buildReceipt, type FinalReport } from "./receipts.js";
import {
  nextProgressSeq,
  PhaseConflictError,
  type LocalAssignment,
  type OutboxReceipt,
  type PhaseChange,
  type RunnerStore,
  type StoredAnswer,
} from "./store.js";
import type { RunnerTasks } from "./tasks.js";
import { CancelRequested, isSubmission, submission, toolGrant, type Authorize, type Submission, type ToolDefinition } from "./tools.js";

/** A tool as the runner holds it: its definition under its name. */
export interface RegisteredTool extends ToolDefinition<unknown> {
  name: string;
}

/** What one claim's execution needs of the runner that holds it. */
export interface ExecutionHost {
  readonly store: RunnerStore;
  readonly outbox: Outbox;
  readonly tasks: RunnerTasks;
  readonly logger: Logger;
  readonly authorize: Authorize;
  /** Running and ready: an unconfirmed claim may still be accepted (otherwise the gateway hands it back). */
  takesClaims(): boolean;
  /** Shutting down: a confirmed handler is not started (it stays `confirmed` and starts on the next start). */
  startsHandlers(): boolean;
  /** Closed: an outcome can no longer be saved. */
  closed(): boolean;
  /** The execution no longer holds a slot (its outcome was answered, or it was handed over). */
  released(execution: ClaimExecution): void;
}

/**
 * One claim, from its grant to its answered outcome (like an activity execution): vet the grant, save
 * and send `accepted` (or a `refused`), start the handler once `accepted` is recorded (a read's, which
 * has no side effects, once `accepted` is saved), save and send its outcome (or its submission), and let
 * go of the slot once that is answered. Every phase change goes through the table in `phases.ts` as a
 * compare-and-set in the store.
 */
export class ClaimExecution {
  private readonly abortController = new AbortController();
  /** Set while the handler runs. */
  private handler: Promise<void> | undefined;
  /** The handler was started (a read's ahead of the answer to `accepted`): the confirmation starts nothing more. */
  private started = false;
  /** The `rerun` tag of a read found in the store at start-up, which runs again (`outcomeReceipt`). */
  private readonly rerun: string | undefined;
  /** Resolves once `accepted` is answered (a submission made ahead of the answer waits for it). */
  private readonly acceptedAnswered: Promise<void>;
  private settleAcceptedAnswered!: () => void;
  /**
   * Of a read started while its claim was being saved: what its next receipt is sent behind (see
   * `AheadOfClaim`); its progress reports resolve once queued (`ProgressReporter`).
   */
  private ahead: AheadOfClaim | undefined;

  constructor(
    private readonly host: ExecutionHost,
    readonly grant: Grant,
    /** Undefined for a claim the store holds of a tool this process no longer registers. */
    private readonly tool: RegisteredTool | undefined,
    /**
     * The local phase as of the last change this execution queued in the store. The store commits
     * writes in the order they are queued, so each compare-and-set starts from the phase the one
     * queued before it leaves, whichever of the handler's outcome and the gateway's answer comes first.
     */
    private phase: Phase = "accepting",
    /** The claim's receipts as the store held them at start-up; undefined for a claim granted to this process. */
    private readonly restored?: readonly OutboxReceipt[],
  ) {
    this.acceptedAnswered = new Promise((resolve) => (this.settleAcceptedAnswered = resolve));
    this.rerun = restored !== undefined && grant.tool_kind === "read" ? rerunTag() : undefined;
  }

  /**
   * The final receipt of the handler's outcome. A read found in the store at start-up runs again,
   * and its outcome takes an id of its own (`receiptId`'s `rerun`): the first run's may have left
   * before it was durable (`isReadAheadOutcome`) and been lost with the store, maybe with another result.
   */
  private outcomeReceipt(report: FinalReport): OutboxReceipt {
    return finalReceipt(this.grant, report, Date.now(), this.rerun);
  }

  get assignmentId(): string {
    return this.grant.assignment_id;
  }

  /** The running handler's end, when one runs. */
  get running(): Promise<void> | undefined {
    return this.handler;
  }

  /** The change for `event` from the phase of the last change queued; the phase moves at once (see `phase`). */
  private change(event: PhaseEvent): { from: Phase; to: Phase } {
    const change = transition(this.phase, event);
    this.phase = change.to;
    return change;
  }

  /** What the gateway's answer to one of this claim's receipts changes, taken as queued now (see `phase`). */
  answerChange(receipt: OutboxReceipt, status: StoredAnswer["status"]): { from: Phase; to: Phase } | undefined {
    if (receipt.generation !== this.grant.generation) return undefined;
    const change = answerChange(receipt.kind, status, this.phase);
    if (change) this.phase = change.to;
    return change;
  }

  /** Fires the handler's `ctx.signal` (once: a second reason is ignored). */
  abort(reason: CancelRequested): void {
    this.abortController.abort(reason);
  }

  /**
   * From the grant to `accepted`: check it, ask the product, save the claim with its first receipt,
   * send. A refusal (digest, arguments, authorize, no compensate handler) is saved instead as a
   * `refused` receipt in the `reporting` phase: no `accepted` is ever sent and no handler ever runs.
   * Resolves false when the claim is not held (handed back, or not saved).
   */
  async accept(): Promise<boolean> {
    const { grant } = this;
    try {
      const refusal = await this.vet();
      // Detaching or not ready: the gateway hands this unconfirmed claim back to the candidates.
      if (!this.host.takesClaims()) return false;
      const now = Date.now();
      const local: LocalAssignment = {
        assignmentId: grant.assignment_id,
        generation: grant.generation,
        grant,
        phase: refusal ? "reporting" : "accepting",
        createdAt: now,
        updatedAt: now,
      };
      // The digest of the grant vetted above: the gateway refuses `accepted` if it is not the assignment's.
      const first = refusal
        ? buildReceipt(grant, { kind: "refused", error: refusal }, now)
        : buildReceipt(grant, { kind: "accepted", operation_key: grant.operation_key, argument_digest: grant.argument_digest }, now);
      if (refusal) this.host.logger.warn({ assignment_id: grant.assignment_id, ...refusal }, "grant refused before any side effect");
      const sent = this.host.store.createAssignment(local, [first]).then(() => this.host.outbox.send(grant, [first]));
      // A read has no side effects: it runs while `accepted` is answered, and starts as soon as its
      // claim is queued in the store. What it saves is queued behind the claim, so the store commits
      // it with the claim (one transaction when it comes in the same turn) or later, never without
      // it, and it is sent behind `accepted` (`ahead`), applied only behind a recorded answer.
      if (!refusal && grant.tool_kind === "read") {
        this.ahead = {
          last: sent,
          unsaved: (err: unknown) =>
            this.host.logger.warn({ err: errorText(err), assignment_id: grant.assignment_id }, "a read's progress report could not be saved; it is not sent"),
        };
        void this.start().catch((err: unknown) =>
          this.host.logger.error({ err: errorText(err), assignment_id: grant.assignment_id }, "a read started ahead of its confirmation could not report"),
        );
      }
      await sent;
      return true;
    } catch (err) {
      this.host.logger.error(
        { err: errorText(err), assignment_id: grant.assignment_id },
        "could not save the claim; it returns to the candidates when its lease expires",
      );
      return false;
    }
  }

  /** Why the grant must be refused, or undefined when it may be accepted. */
  private async vet(): Promise<RunnerError | undefined> {
    const { grant, tool } = this;
    if (!tool) return { code: "tool_unavailable", message: `tool '${grant.tool_name}' is not registered in this executor` };
    if (grant.tool_kind !== tool.kind)
      return { code: "tool_kind_mismatch", message: `the grant says ${grant.tool_kind}, the executor registered ${tool.kind}` };
    if (grant.compensates && !tool.compensate)
      return { code: "compensation_unsupported", message: `tool '${tool.name}' has no compensate handler in this executor` };
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
      const decision = await this.host.authorize(toolGrant(grant));
      const allowed = typeof decision === "boolean" ? decision : decision.allowed;
      const reason = typeof decision === "object" ? decision.reason : undefined;
      return allowed ? undefined : { code: "authorization_refused", message: reason ?? "refused by the product's authorize hook" };
    } catch (err) {
      return describeError("authorization_error", err);
    }
  }

  /** The gateway answered one of this claim's receipts (the answer and `change` are saved already). */
  async answered(receipt: OutboxReceipt, answer: StoredAnswer, change: PhaseChange | undefined): Promise<void> {
    // Whatever the answer, learning that the run ended stops the handler (a missed control message included).
    if (answer.code === "run_terminated") this.abort(new CancelRequested("run_cancelled", "the run is terminated"));
    if (receipt.kind === "accepted" && receipt.generation === this.grant.generation) this.settleAcceptedAnswered();
    if (!change || receipt.generation !== this.grant.generation) return;
    if (change.to === "confirmed") return this.start();
    // Never confirmed: a read that ran ahead stops. What it saved still leaves (every saved receipt is
    // answered), and the gateway applies none of it.
    if (change.to === "refused" && this.handler)
      this.abort(new CancelRequested("claim_refused", `the gateway refused the claim: ${answer.code ?? answer.status}`));
    this.host.released(this);
  }

  /**
   * Runs the handler, once: of a confirmed claim; of a read whose `accepted` was just saved; or again
   * for a read interrupted by a crash. A write is marked `running` first, durably: after a crash that
   * mark says its side effects may exist. A read has none by contract and runs again after a crash
   * whatever its phase, so it is not marked.
   */
  async start(): Promise<void> {
    // Shutting down: a confirmed claim stays `confirmed` in the store and starts on the next start.
    if (!this.host.startsHandlers() || this.started) return;
    this.started = true;
    const { grant, tool } = this;
    const unavailable = (err: unknown) => this.report(this.outcomeReceipt({ kind: "failed", error: describeError("tool_unavailable", err) }));
    if (!tool) return unavailable(new Error(`tool '${grant.tool_name}' is not registered in this executor`));
    let args: unknown;
    try {
      args = tool.arguments ? tool.arguments.parse(grant.arguments) : grant.arguments;
    } catch (err) {
      return unavailable(err);
    }
    if (grant.tool_kind === "write") await this.host.store.setPhase({ assignmentId: grant.assignment_id, generation: grant.generation }, this.change("start"));
    // A claim found in the store at start-up continues its progress past what may have been sent.
    const seq = nextProgressSeq(this.restored ?? [], this.restored !== undefined);
    this.handler = this.run(tool, args, new ProgressReporter(grant, this.host.outbox, seq, this.ahead)).finally(() => {
      this.handler = undefined;
    });
  }

  private async run(tool: RegisteredTool, args: unknown, progress: ProgressReporter): Promise<void> {
    const { grant } = this;
    const ctx = {
      arguments: args,
      grant: toolGrant(grant),
      signal: this.abortController.signal,
      progress: (data: unknown) => progress.report(data),
      submit: submission,
    };
    const { compensates } = grant;
    // A compensation runs the tool's `compensate` (vetted before `accepted`), never its handler.
    const call = compensates ? () => tool.compensate!({ ...ctx, compensates }) : () => tool.handler(ctx);
    const [outcome] = await Promise.allSettled([(async () => call())()]);
    await progress.close();
    if (outcome!.status === "fulfilled" && isSubmission(outcome.value)) return this.submit(outcome.value);
    await this.report(this.outcomeReceipt(reportOf(outcome!)));
  }

  /**
   * The handler left its business task running: the submission is saved (and sent), the task is held
   * for `runner.tasks`, and the claim's slot is free. A task reference already held here cannot name
   * a second task: the handler may have started one anyway, so that is `reconciliation_required`.
   */
  private async submit(task: Submission): Promise<void> {
    const { grant, host } = this;
    // A task is only held for a confirmed claim: a read that ran ahead waits for the answer to
    // `accepted`, which may also have refused the claim before the handler returned.
    if (this.phase === "accepting") {
      host.outbox.sendLingering(grant);
      await this.acceptedAnswered;
    }
    if (this.phase === "refused") {
      host.logger.warn(
        { assignment_id: grant.assignment_id, task_ref: task.task_ref },
        "a read submitted a background task before its claim was confirmed, and the gateway refused the claim: the task is not held; stop it in the product",
      );
      return;
    }
    const unknown = (error: RunnerError) => this.report(this.outcomeReceipt({ kind: "reconciliation_required", error }));
    if (host.closed()) return unknown({ code: "executor_shutdown", message: "the handler submitted after the runner closed" }); // logged, not saved
    if (host.tasks.holds(task.task_ref))
      return unknown({ code: "task_ref_in_use", message: `task_ref '${task.task_ref}' already names another submitted task of this executor` });
    let receipt: OutboxReceipt;
    try {
      receipt = buildReceipt(grant, { kind: "submission", task_ref: task.task_ref, status: task.status }, Date.now());
    } catch (err) {
      // Not one `ctx.submit` made (it validates): the task may have started, so its outcome is unknown.
      return unknown(describeError("invalid_submission", err));
    }
    try {
      await host.tasks.submitting(task.task_ref, async () => {
        await host.outbox.append(grant, receipt, this.change("submit"), this.ahead?.last);
        host.tasks.hold(
          grant,
          { task_ref: task.task_ref, status: task.status },
          await host.store.listReceipts({ assignmentId: grant.assignment_id, generation: grant.generation }),
        );
      });
    } catch (err) {
      if (!(err instanceof PhaseConflictError)) throw err;
      host.logger.warn({ assignment_id: grant.assignment_id, task_ref: task.task_ref }, "submission ignored: the assignment was already reported");
      return;
    }
    host.released(this);
  }

  /**
   * The shutdown deadline passed with the handler still running: it is told to stop and reported
   * `reconciliation_required` (`executor_shutdown`), its outcome unknown.
   */
  async reportShutdown(deadlineMs: number): Promise<void> {
    if (!this.handler) return;
    this.abort(new CancelRequested("shutdown", "the executor is shutting down"));
    const error: RunnerError = {
      code: "executor_shutdown",
      message: `the handler was still running ${deadlineMs} ms after shutdown began; its outcome is unknown`,
    };
    await this.report(this.outcomeReceipt({ kind: "reconciliation_required", error }));
  }

  /** A write that was running when the last process stopped: its outcome is unknown, it never runs again. */
  reportRestarted(): Promise<void> {
    const error: RunnerError = { code: "executor_restarted", message: "the executor stopped while the write handler was running; its outcome is unknown" };
    return this.report(finalReceipt(this.grant, { kind: "reconciliation_required", error }, Date.now()));
  }

  /** Saves the product's settlement of a `reconciliation_required` claim and sends it. */
  reconcile(report: FinalReport): Promise<void> {
    return this.host.outbox.append(this.grant, buildReceipt(this.grant, report, Date.now()), this.change("reconcile"));
  }

  /**
   * Saves a final receipt and sends it (behind the claim's last receipt, for a read ahead of its
   * claim: `ahead`), unless another outcome was reported first, or the claim was refused (compare-and-set).
   */
  private async report(receipt: OutboxReceipt): Promise<void> {
    const { grant, host } = this;
    if (host.closed()) {
      host.logger.warn({ assignment_id: grant.assignment_id, kind: receipt.kind }, "outcome after close is not saved; the assignment was reported at shutdown");
      return;
    }
    const ignored = () =>
      host.logger.warn(
        { assignment_id: grant.assignment_id, kind: receipt.kind, phase: this.phase },
        "outcome ignored: the assignment was already reported, or its claim refused",
      );
    let change: PhaseChange;
    try {
      change = this.change("report");
    } catch (err) {
      if (!(err instanceof IllegalTransitionError)) throw err;
      return ignored();
    }
    try {
      await host.outbox.append(grant, receipt, change, this.ahead?.last);
    } catch (err) {
      if (!(err instanceof PhaseConflictError)) throw err;
      ignored();
    }
  }
}
