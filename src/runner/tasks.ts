import type { Grant } from "../wire/messages.js";
import type { Logger } from "./logger.js";
import { finalReceipt } from "./outcome.js";
import type { Outbox } from "./outbox.js";
import { transition } from "./phases.js";
import { ProgressReporter } from "./progress.js";
import type { FinalReport } from "./receipts.js";
import { nextProgressSeq, PhaseConflictError, type OutboxReceipt } from "./store.js";
import type { SubmittedTaskInfo, TaskStopRequest, ToolGrant } from "./tools.js";

/** A submitted task this executor's store holds, by its reference. */
interface HeldTask {
  taskRef: string;
  status: string;
  grant: Grant;
  /** Numbers the task's later progress after what its handler reported. */
  progress: ProgressReporter;
}

/** Thrown by `runner.tasks` for a reference it does not hold (never submitted here, or already reported). */
export class UnknownTaskError extends Error {
  override readonly name = "UnknownTaskError";
}

/**
 * `runner.tasks`: how the product reports a submitted task's progress and outcome, by its task
 * reference, whenever its business system gets there (docs/async-tasks.md). Every report is saved in
 * the runner's store first, then delivered by the outbox under the claim that submitted the task
 * (saved then sent, resent with the same id and body), so it survives restarts and reaches the
 * gateway once one is reachable. One outcome per task: a second report throws, whichever came first.
 */
export class RunnerTasks {
  private readonly held = new Map<string, HeldTask>();
  private readonly byAssignment = new Map<string, string>();
  /**
   * Submissions being saved, or (found in the store at start-up) being queued again for sending: a
   * product fast enough to report before then waits for it, so its report goes out after the
   * submission (the outbox keeps a claim's queue order).
   */
  private readonly saving = new Map<string, Promise<void>>();

  constructor(
    private readonly outbox: () => Outbox,
    private readonly logger: Logger,
    private readonly toolGrant: (grant: Grant) => ToolGrant,
    private readonly stopHook: (grant: Grant) => ((request: TaskStopRequest) => void | Promise<void>) | undefined,
  ) {}

  /**
   * Holds a task whose submission is saved; `saved` are the claim's receipts so far (its progress
   * continues their seq). Reports for it wait for `queued`, when given: a task found at start-up,
   * whose saved receipts the outbox has yet to queue again.
   */
  hold(grant: Grant, task: { task_ref: string; status: string }, saved: readonly OutboxReceipt[], queued?: Promise<void>): void {
    // `queued` is given for a task found at start-up only.
    const nextSeq = nextProgressSeq(saved, queued !== undefined);
    this.held.set(task.task_ref, { taskRef: task.task_ref, status: task.status, grant, progress: new ProgressReporter(grant, this.outbox(), nextSeq) });
    this.byAssignment.set(grant.assignment_id, task.task_ref);
    if (!queued) return;
    this.saving.set(task.task_ref, queued);
    void queued.then(() => {
      if (this.saving.get(task.task_ref) === queued) this.saving.delete(task.task_ref);
    });
  }

  /** Whether `taskRef` is taken by a task still waiting for its outcome here (or being submitted). */
  holds(taskRef: string): boolean {
    return this.held.has(taskRef) || this.saving.has(taskRef);
  }

  /** Runs the saving of a submission, during which reports for its task wait. */
  async submitting(taskRef: string, save: () => Promise<void>): Promise<void> {
    const saved = save();
    this.saving.set(
      taskRef,
      saved.catch(() => undefined),
    );
    try {
      await saved;
    } finally {
      this.saving.delete(taskRef);
    }
  }

  /** The tasks waiting for their outcome, oldest first. */
  list(): SubmittedTaskInfo[] {
    return [...this.held.values()].map((t) => ({ task_ref: t.taskRef, status: t.status, grant: this.toolGrant(t.grant) }));
  }

  /** Reports the task's progress (saved when it resolves, delivered in order). */
  async progress(taskRef: string, data: unknown): Promise<void> {
    await (await this.get(taskRef)).progress.report(data);
  }

  /** The task finished: its result enters the run's history as its own entry, projected once with the tool's budget. */
  complete(taskRef: string, result: unknown): Promise<void> {
    return this.report(taskRef, { kind: "completed", result });
  }

  /** The task failed, as the product confirmed (nothing was done, or what was is known). */
  fail(taskRef: string, code: string, message: string): Promise<void> {
    return this.report(taskRef, { kind: "failed", error: { code, message } });
  }

  /** The task stopped (after a cancel request, or on the product's own account). */
  cancelled(taskRef: string, reason: string): Promise<void> {
    return this.report(taskRef, { kind: "cancelled", reason });
  }

  /** The product cannot tell what the task did: `reconciliation_required`, settled later with `runner.reconcile`. */
  unknown(taskRef: string, code: string, message: string): Promise<void> {
    return this.report(taskRef, { kind: "reconciliation_required", error: { code, message } });
  }

  /** Tells the product a held task should stop; a hook that throws is logged, the task stays held. */
  async stop(assignmentId: string, kind: TaskStopRequest["kind"], reason: string): Promise<void> {
    const taskRef = this.byAssignment.get(assignmentId);
    const task = taskRef === undefined ? undefined : this.held.get(taskRef);
    if (!task) return;
    const hook = this.stopHook(task.grant);
    if (!hook) {
      this.logger.warn({ assignment_id: assignmentId, task_ref: task.taskRef, kind }, "a submitted task should stop, but its tool has no cancelTask hook");
      return;
    }
    try {
      await hook({ kind, reason, task_ref: task.taskRef, status: task.status, grant: this.toolGrant(task.grant) });
    } catch (err) {
      this.logger.error({ err, assignment_id: assignmentId, task_ref: task.taskRef }, "cancelTask hook failed");
    }
  }

  private async get(taskRef: string): Promise<HeldTask> {
    this.outbox(); // throws before start() and after close(): the tasks live in the store the runner opens
    await this.saving.get(taskRef);
    const task = this.held.get(taskRef);
    if (!task) throw new UnknownTaskError(`no submitted task '${taskRef}' is waiting for its outcome in this executor's store`);
    return task;
  }

  private async report(taskRef: string, report: FinalReport): Promise<void> {
    const task = await this.get(taskRef);
    // Progress saved before the outcome is sent before it (the outbox keeps save order).
    await task.progress.close();
    try {
      await this.outbox().append(task.grant, finalReceipt(task.grant, report, Date.now()), transition("submitted", "report"));
    } catch (err) {
      // Not saved (the store failed): the task stays held, the report may be tried again.
      if (!(err instanceof PhaseConflictError)) throw err;
      this.release(task);
      throw new UnknownTaskError(`task '${taskRef}' was already reported`);
    }
    this.release(task);
  }

  private release(task: HeldTask): void {
    if (this.held.get(task.taskRef) !== task) return;
    this.held.delete(task.taskRef);
    this.byAssignment.delete(task.grant.assignment_id);
  }
}
