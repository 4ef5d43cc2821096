import { ToolgateError } from "../../errors/toolgate-error.js";
import { forEachConcurrently } from "../../kv/concurrently.js";
import { isTerminalAssignmentState } from "../model/assignment-states.js";
import type { ProgressStore } from "../receipts/progress-store.js";
import type { ProjectionStore } from "../receipts/projection-store.js";
import type { AssignmentRecord, ProgressEntry, RunRecord, SubmittedTask } from "../model/records.js";
import type { VersionedStore } from "../../kv/versioned-store.js";
import { submissionPreview, taskResultEntry } from "../tasks/task-history.js";
import type { AssignmentView, HistoryEntry, RunTask, TaskResultEntry } from "./views.js";

/** Whether any progress can be stored: none is taken before `accepted`, and a first generation not yet confirmed has had none. */
function mayHaveProgress(a: AssignmentRecord): boolean {
  return !(a.generation === 0 && (a.state === "pending" || a.state === "claimed"));
}

/** Parallel reads when assembling a history. */
const READ_CONCURRENCY = 32;

/** Read side of the execution path: what the model sees of a run, and one assignment in detail. */
export class HistoryReader {
  constructor(
    private readonly assignments: VersionedStore<AssignmentRecord>,
    private readonly projections: ProjectionStore,
    private readonly progress: ProgressStore,
  ) {}

  /** The run an assignment belongs to (for the agent scope check), undefined when there is no such assignment. */
  async runIdOf(assignmentId: string): Promise<string | undefined> {
    return (await this.assignments.get(assignmentId))?.value.run_id;
  }

  /**
   * The assignment as it stands. Its progress is listed (four requests) only when it can have any,
   * and only when asked for: a caller that follows the progress events itself passes `withProgress: false`.
   * `settled`: the caller was told (by the run's event) that the assignment reached a settled state.
   * A terminal state this process remembers (it wrote the settling compare-and-set, most often) is
   * then served without a read: a terminal state never changes, nor the outcome and projection
   * written with it. Any other is read.
   */
  async assignment(assignmentId: string, { withProgress = true, settled = false } = {}): Promise<AssignmentView> {
    const found = settled ? await this.assignments.recent(assignmentId, (a) => isTerminalAssignmentState(a.state)) : await this.assignments.get(assignmentId);
    const a = found?.value;
    if (!a) throw new ToolgateError("assignment_not_found", `assignment '${assignmentId}' does not exist`);
    return this.view(a, withProgress && mayHaveProgress(a) ? this.progress.list(a) : Promise.resolve([]));
  }

  /**
   * The view of an assignment as its creating request has just written it. Still `pending` at that
   * write, it has no progress, so the progress bucket (four requests to list) is not read; an
   * executor that already claimed it meanwhile gets it read afresh.
   */
  createdView(a: AssignmentRecord): Promise<AssignmentView> {
    return a.state === "pending" ? this.view(a, Promise.resolve([])) : this.assignment(a.assignment_id);
  }

  private async view(a: AssignmentRecord, progressList: Promise<ProgressEntry[]>): Promise<AssignmentView> {
    const [entry, progress, completed] = await Promise.all([
      this.entry(a),
      progressList,
      a.task && a.state === "completed" ? this.projections.ensure(a) : null,
    ]);
    return {
      ...entry,
      // The assignment's own result: for a background task, what its `completed` brought (the history shows it as a task result).
      ...(completed ? { context_preview: completed.context_preview } : {}),
      run_id: a.run_id,
      binding_id: a.binding_id,
      tool_kind: a.tool_kind,
      argument_digest: a.argument_digest,
      operation_key: a.operation_key,
      generation: a.generation,
      executor_id: a.claim?.executor_id ?? null,
      lease_expires_at: a.state === "claimed" ? (a.claim?.lease_expires_at ?? null) : null,
      accepted_receipt_id: a.accepted?.receipt_id ?? null,
      final_receipt_id: a.final?.receipt_id ?? null,
      progress: progress.map(({ seq, progress: p, at }) => ({ seq, progress: p, at })),
      compensates: a.compensates,
      task_cancel: a.task_cancel,
      settled_by: a.settled_by,
      updated_at: a.updated_at,
    };
  }

  /** Every tool call of the run in creation order, and the results of its background tasks in arrival order. */
  async history(run: RunRecord): Promise<{ tool_calls: HistoryEntry[]; task_results: TaskResultEntry[] }> {
    const calls = await this.calls(run);
    const byId = new Map(calls.map((a) => [a.assignment_id, a]));
    const [tool_calls, task_results] = await Promise.all([
      Promise.all(calls.map((a) => this.entry(a))),
      Promise.all(
        (run.task_results ?? []).map((t) => {
          const a = byId.get(t.assignment_id);
          if (!a) throw new ToolgateError("assignment_missing", `task result of '${t.assignment_id}', which run '${run.run_id}' does not list`);
          return taskResultEntry(a, t, this.projections);
        }),
      ),
    ]);
    return { tool_calls, task_results };
  }

  /** The task view of a run: each background task its calls submitted, with its progress and how many results it has. */
  async tasks(run: RunRecord): Promise<RunTask[]> {
    const submitting = (await this.calls(run)).filter((a): a is AssignmentRecord & { task: SubmittedTask } => a.task !== undefined);
    return Promise.all(
      submitting.map(async (a) => ({
        assignment_id: a.assignment_id,
        tool_call_id: a.tool_call_id,
        tool_name: a.tool_name,
        state: a.state,
        task: a.task,
        task_cancel: a.task_cancel,
        progress: (await this.progress.list(a)).map(({ seq, progress, at }) => ({ seq, progress, at })),
        results: (run.task_results ?? []).filter((t) => t.assignment_id === a.assignment_id).length,
      })),
    );
  }

  private async calls(run: RunRecord): Promise<AssignmentRecord[]> {
    const calls: AssignmentRecord[] = new Array(run.assignment_ids.length);
    await forEachConcurrently(run.assignment_ids, READ_CONCURRENCY, async (id, i) => {
      const a = (await this.assignments.get(id))?.value;
      if (!a) throw new ToolgateError("assignment_missing", `assignment '${id}' of run '${run.run_id}' is missing`);
      calls[i] = a;
    });
    return calls;
  }

  private async entry(a: AssignmentRecord): Promise<HistoryEntry> {
    // `ensure`, not `get`: a crash between the completion and its projection is healed by the first reader.
    const projection = a.task
      ? { context_preview: submissionPreview({ ...a, task: a.task }) }
      : a.state === "completed"
        ? await this.projections.ensure(a)
        : null;
    return {
      assignment_id: a.assignment_id,
      tool_call_id: a.tool_call_id,
      tool_name: a.tool_name,
      arguments: a.arguments,
      state: a.state,
      context_preview: projection?.context_preview ?? null,
      outcome: a.outcome && a.outcome.kind !== "completed" ? a.outcome : null,
      compensated_by: a.compensated_by,
      task: a.task ?? null,
      created_at: a.created_at,
    };
  }
}
