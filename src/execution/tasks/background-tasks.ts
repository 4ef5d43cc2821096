import type { Logger } from "../../log/logger.js";
import type { GatewayOutcomeError } from "../../errors/protocol-codes.js";
import type { Receipt } from "../../wire/messages.js";
import type { VersionedStore } from "../../kv/versioned-store.js";
import { nextAssignmentState } from "../model/assignment-states.js";
import type { AppliedReceipt, AssignmentRecord, Outcome, RunRecord, TaskResult } from "../model/records.js";
import type { Watchlist } from "../claims/watchlist.js";

/** How long a submitted task may run when its tool declares no `task_deadline_ms` (a day). */
export const DEFAULT_TASK_DEADLINE_MS = 86_400_000;

type Submission = Extract<Receipt, { kind: "submission" }>;

/**
 * Async business tasks on the gateway (docs/async-tasks.md): a `submission` leaves the business task
 * running in the background (`running → submitted`), watched by its own deadline instead of a claim
 * lease or its executor's presence; each final receipt that settles it (or the deadline) becomes its
 * own entry of the run's history, appended once to the run after the tool calls made so far, so
 * what the model saw before never changes.
 */
export class BackgroundTasks {
  constructor(
    private readonly runs: VersionedStore<RunRecord>,
    private readonly assignments: VersionedStore<AssignmentRecord>,
    private readonly watchlist: Watchlist,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  /** The assignment a `submission` moves to `to` (the state table's `submit` edge), with its task and deadline. */
  static submitted(cur: AssignmentRecord, r: Submission, to: AssignmentRecord["state"], applied: AppliedReceipt): AssignmentRecord {
    const task = {
      task_ref: r.task_ref,
      status: r.status,
      submitted_at: applied.at,
      deadline_at: applied.at + (cur.task_deadline_ms ?? DEFAULT_TASK_DEADLINE_MS),
    };
    return { ...cur, state: to, final: applied, task, updated_at: applied.at };
  }

  /**
   * After a receipt moved the assignment. A submission is watched until its deadline (the watch
   * the claim left becomes the deadline's); a task settled by a final receipt gets its history entry.
   * Idempotent: a redelivered receipt does it again harmlessly.
   */
  async afterReceipt(a: AssignmentRecord): Promise<void> {
    if (!a.task) return;
    if (a.state === "submitted") await this.watchlist.watch(a.assignment_id, a.task.deadline_at);
    else await this.appendResult(a);
  }

  /**
   * The sweeper's look at a watched task (true: nothing left to watch). Past its deadline a submitted
   * one goes to `reconciliation_required` (`expire_task`): the product may have done it or not, so it
   * is never failed or retried; the product's late final receipt, or an operator, still settles it.
   * One settled already (a sweeper died before its history entry) gets its entry.
   */
  async checkDeadline(a: AssignmentRecord): Promise<boolean> {
    const task = a.task!;
    if (a.state !== "submitted") {
      await this.afterReceipt(a);
      return true;
    }
    if (task.deadline_at > this.now()) {
      await this.watchlist.watch(a.assignment_id, task.deadline_at);
      return false;
    }
    const res = await this.assignments.mutate(a.assignment_id, (cur) => {
      const to = nextAssignmentState(cur.state, "expire_task");
      if (!to || !cur.task) return { result: false };
      const error: GatewayOutcomeError = {
        code: "task_deadline_passed",
        message: `task '${cur.task.task_ref}' sent no final receipt within the tool's task deadline (${cur.task.deadline_at - cur.task.submitted_at} ms); its outcome is unknown`,
      };
      return { write: { ...cur, state: to, outcome: { kind: "reconciliation_required" as const, error }, updated_at: this.now() }, result: true };
    });
    if (res?.result) this.log.warn({ assignment_id: a.assignment_id, task_ref: task.task_ref }, "submitted task passed its deadline; reconciliation required");
    if (res) await this.afterReceipt(res.value);
    return true;
  }

  /** Appends the task's current outcome to its run's history, once per settling receipt (or deadline). */
  private async appendResult(a: AssignmentRecord): Promise<void> {
    const outcome: Outcome | null = a.outcome;
    if (!outcome) return;
    // Settled by no receipt of its own (its deadline), the submission is still the applied one.
    const receiptId = a.final && a.final.kind !== "submission" ? a.final.receipt_id : null;
    await this.runs.mutate(a.run_id, (run) => {
      const results = run.task_results ?? [];
      if (results.some((t) => t.assignment_id === a.assignment_id && t.receipt_id === receiptId && t.outcome.kind === outcome.kind))
        return { result: undefined };
      const entry: TaskResult = { assignment_id: a.assignment_id, receipt_id: receiptId, outcome, after_tool_calls: run.assignment_ids.length, at: this.now() };
      return { write: { ...run, task_results: [...results, entry] }, result: undefined };
    });
  }
}
