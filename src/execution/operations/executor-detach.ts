import type { Logger } from "../../log/logger.js";
import { detachedAny, type DetachedClaims } from "../../wire/messages.js";
import type { GatewayOutcomeError } from "../../errors/protocol-codes.js";
import { nextAssignmentState } from "../model/assignment-states.js";
import { forEachConcurrently } from "../../kv/concurrently.js";
import type { Dispatcher } from "../dispatch/dispatcher.js";
import type { BindingLookup } from "../claims/presence.js";
import type { AssignmentRecord } from "../model/records.js";
import { requeued } from "../dispatch/requeue.js";
import type { VersionedStore } from "../../kv/versioned-store.js";
import type { Watchlist } from "../claims/watchlist.js";

/**
 * `release_unconfirmed`: the executor is leaving cleanly (`detaching` heartbeat) and finishes its
 * confirmed work itself. `gone`: it is not coming back for it (operator detach, presence lapsed).
 * `forgotten`: as `gone`, for the claims its held-claims report left out (its store no longer has them).
 */
export type DetachMode = "release_unconfirmed" | "gone" | "forgotten";

/** Why confirmed work's outcome became unknown, by mode (the `executor_detached` error's message). */
const UNKNOWN_OUTCOME: Record<Exclude<DetachMode, "release_unconfirmed">, (executorId: string) => string> = {
  gone: (executorId) => `executor '${executorId}' left while the work ran; its outcome is unknown (the executor or an operator settles it)`,
  forgotten: (executorId) => `executor '${executorId}' started again without this claim in its store; its outcome is unknown (an operator settles it)`,
};

/** What detaching did to one assignment. */
export type DetachOutcome = keyof DetachedClaims;

/** Assignments read at once while looking for an executor's holdings. */
const SCAN_CONCURRENCY = 16;

/**
 * Executor detach (docs/protocol.md section 4): unconfirmed claims go back to the candidates for another
 * executor (`release`, generation + 1); confirmed write work becomes `reconciliation_required`
 * (`detach`: it may have happened, it is never re-run elsewhere); confirmed read work is offered
 * again only when its binding says `retry_reads_safe` (`retry_read`). The run is not touched.
 *
 * Every claimed or running assignment is watched (lease, then presence), so an executor's holdings
 * are found through the watchlist, never by scanning every assignment ever made.
 */
export class ExecutorDetacher {
  constructor(
    private readonly assignments: VersionedStore<AssignmentRecord>,
    private readonly watchlist: Watchlist,
    private readonly dispatcher: Dispatcher,
    private readonly bindings: BindingLookup,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Detaches `executorId` from the claims it holds in `scope`, but for those `kept` says it still
   * holds (asked of the current record, generation included).
   */
  async detach(scope: string, executorId: string, mode: DetachMode, kept: (a: AssignmentRecord) => boolean = () => false): Promise<DetachedClaims> {
    const result: DetachedClaims = { released: [], reconciliation_required: [], retried: [] };
    await forEachConcurrently(await this.watchlist.watchedIds(), SCAN_CONCURRENCY, async (id) => {
      const a = (await this.assignments.get(id))?.value;
      if (!a || a.scope !== scope) return;
      const outcome = await this.detachOne(a, executorId, mode, kept);
      if (outcome) result[outcome].push(id);
    });
    if (detachedAny(result)) this.log.info({ scope, executor_id: executorId, mode, ...result }, "executor detached");
    return result;
  }

  /** Detaches one assignment from `executorId` if that executor still holds it (and `kept` does not keep it). */
  async detachOne(
    a: AssignmentRecord,
    executorId: string,
    mode: DetachMode,
    kept: (a: AssignmentRecord) => boolean = () => false,
  ): Promise<DetachOutcome | undefined> {
    const retryRead = a.state === "running" && a.tool_kind === "read" && (await this.bindings.getBinding(a.binding_id))?.retry_reads_safe === true;
    const res = await this.assignments.mutate<DetachOutcome | undefined>(a.assignment_id, (cur) => {
      if (cur.claim?.executor_id !== executorId || kept(cur)) return { result: undefined };
      if (cur.state === "claimed") return written(requeued(cur, "release", this.now()), "released");
      if (cur.state !== "running" || mode === "release_unconfirmed") return { result: undefined };
      if (retryRead) return written(requeued(cur, "retry_read", this.now()), "retried");
      const to = nextAssignmentState(cur.state, "detach")!;
      const error: GatewayOutcomeError = { code: "executor_detached", message: UNKNOWN_OUTCOME[mode](executorId) };
      return written({ ...cur, state: to, outcome: { kind: "reconciliation_required" as const, error }, updated_at: this.now() }, "reconciliation_required");
    });
    if (res?.written && res.value.state === "pending") await this.dispatcher.dispatch(a.assignment_id);
    return res?.written ? res.result : undefined;
  }
}

function written(next: AssignmentRecord | undefined, result: DetachOutcome): { write: AssignmentRecord; result: DetachOutcome } | { result: undefined } {
  return next ? { write: next, result } : { result: undefined };
}
