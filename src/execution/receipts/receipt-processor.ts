import { CanonicalJsonError } from "../../budget/index.js";
import type { Logger } from "../../log/logger.js";
import { receiptBodyDigest } from "../../wire/digest.js";
import { isClaimReceiptId } from "../../wire/receipt-ids.js";
import { chainShape, togetherShape } from "../../wire/receipt-chains.js";
import type { ExecutionMetrics } from "../../metrics/metrics.js";
import type { Receipt, ReceiptAnswer, ReceiptKind, RefusalCode } from "../../wire/messages.js";
import { isRunEndState, isTerminalAssignmentState, nextAssignmentState, type AssignmentEvent } from "../model/assignment-states.js";
import { claimTokenMatcher } from "../claims/claim-token.js";
import type { RunEventLog } from "../events/event-log.js";
import type { ProgressStore } from "./progress-store.js";
import { progressEvent } from "../events/run-events.js";
import type { ProjectionStore } from "./projection-store.js";
import type { ReceiptIndex } from "./receipt-index.js";
import { appliedEntry, progressIndexEntry, replacing } from "./receipt-index.js";
import type { AppliedReceipt, AssignmentRecord, ClaimRecord, Outcome, ReceiptIndexEntry, RunRecord } from "../model/records.js";
import { runTakesWork } from "../model/run-states.js";
import type { Decision, Versioned, VersionedStore } from "../../kv/versioned-store.js";
import type { Watchlist } from "../claims/watchlist.js";
import { BackgroundTasks } from "../tasks/background-tasks.js";

/** One receipt as taken from the receipts stream. */
export interface ReceiptInput {
  /** The scope, executor and assignment tokens of the subject it was published on. */
  readonly scope: string;
  readonly subjectExecutorId: string;
  readonly subjectAssignmentId: string;
  readonly receipt: Receipt;
  /** Its sequence in `TG_RECEIPTS`. */
  readonly streamSeq: number;
  /** Its `Nats-Msg-Id`, the key the stream de-duplicated it on (an executor sets it to the `receipt_id`; a chain's is its first receipt's). */
  readonly msgId: string | undefined;
  /** It came in a message the stream stored only as the first of its subject (a chain, `src/wire/receipt-chains.ts`). */
  readonly firstOnSubject?: boolean;
  /** Whether the consumer delivered it before (not acknowledged in time, a gateway stopped). */
  readonly redelivered: boolean;
}

/** Taken off the receipts stream's de-duplication window: the gateways' and the server's clocks may differ by up to half of it. */
export const DEDUP_MARGIN_MS = 30_000;

const EVENT_BY_KIND: Readonly<Record<ReceiptKind, AssignmentEvent>> = {
  accepted: "accept",
  refused: "refuse",
  progress: "progress",
  submission: "submit",
  completed: "complete",
  failed: "fail",
  cancelled: "cancel",
  reconciliation_required: "require_reconciliation",
};

/** `indexed`: the receipt is indexed where it was stored (its progress entry, store layout 3), so it takes no entry of the receipt index. */
type Verdict = { status: "recorded" | "duplicate" | "late_ignored" | "rejected"; code?: RefusalCode; reason?: string; indexed?: true };
const rejected = (code: RefusalCode, reason: string): Verdict => ({ status: "rejected", code, reason });
const RECORDED: Verdict = { status: "recorded" };

/**
 * Decides and applies one receipt: proof of the claim (token, executor, generation), the receipt
 * index or the assignment's applied receipts (duplicate or conflict), the run's end (a terminated
 * run takes nothing: `late_ignored`), and the state table, the change itself a compare-and-set on
 * the assignment. The run is not read: its end settles every assignment of its list before the run
 * is terminal (`RunService.end`), so the assignment's compare-and-set orders a receipt against the
 * end, and an assignment the end settled answers for it. Only one waiting for reconciliation, which
 * an end leaves as it is, asks its run. Processing the same message twice (redelivery after a
 * crash, two gateways) yields the same answer and changes nothing more.
 */
export class ReceiptProcessor {
  constructor(
    private readonly deps: {
      /** Read only for an assignment waiting for reconciliation (see `runHasEnded`). */
      runs: VersionedStore<RunRecord>;
      assignments: VersionedStore<AssignmentRecord>;
      index: ReceiptIndex;
      progress: ProgressStore;
      events: RunEventLog;
      projections: ProjectionStore;
      watchlist: Watchlist;
      tasks: BackgroundTasks;
      log: Logger;
      /** The receipts stream's de-duplication window (`duplicate_window`): see `indexMayHold`. */
      dedupWindowMs: number;
      metrics?: Pick<ExecutionMetrics, "receiptIndexLookup">;
      now?: () => number;
    },
  ) {}

  private now(): number {
    return (this.deps.now ?? Date.now)();
  }

  /**
   * Whether the assignment took its receipt `receiptId`: applied it, or is settled (what comes
   * after it is decided on that), or is gone. On what this process last wrote first (it applied the
   * receipt, usually), else on a fresh read. Asked for a receipt sent after it (`Tg-After`).
   */
  async applied(assignmentId: string, receiptId: string): Promise<boolean> {
    const tookIt = (a: AssignmentRecord) => isTerminalAssignmentState(a.state) || appliedEntry(a, receiptId) !== null;
    const found = await this.deps.assignments.recent(assignmentId, tookIt);
    return !found || tookIt(found.value);
  }

  /** Whether the assignment is a read (as remembered: a tool call's kind never changes). */
  async isRead(assignmentId: string): Promise<boolean> {
    return (await this.deps.assignments.recent(assignmentId))?.value.tool_kind === "read";
  }

  /** Whether the receipt is indexed: refused, late, or progress kept in the bucket (it had its turn, outside its assignment's record). */
  async indexed(receiptId: string): Promise<boolean> {
    const [entry, progress] = await Promise.all([this.deps.index.get(receiptId), this.deps.progress.indexEntry(receiptId)]);
    return entry !== null || progress !== null;
  }

  async process(input: ReceiptInput): Promise<ReceiptAnswer> {
    const r = input.receipt;
    const answer = (verdict: Verdict): ReceiptAnswer => answerTo(r, verdict);
    const elsewhere = subjectMismatch(input);
    if (elsewhere) return answer(rejected("malformed", elsewhere));
    const digest = bodyDigestOf(r);
    if (digest instanceof CanonicalJsonError) return answer(rejected("invalid_result", `the receipt is not representable as JSON: ${digest.message}`));

    // A remembered assignment only names the claim here (a claim never changes once made); when the
    // index may hold the receipt, it is read beside the assignment. Progress recorded in the bucket
    // (before store layout 4) is never decided on a remembered assignment (no compare-and-set of it
    // follows): it trusts none.
    const proof: ClaimProof = { executor_id: r.executor_id, matches: claimTokenMatcher(r.claim_token) };
    const bySet = appliedBySet(r, this.deps.progress.carriedByRecords);
    const remembered = this.deps.assignments.remembered(r.assignment_id);
    const lookup = remembered === undefined || this.indexMayHold(input, remembered, proof);
    this.deps.metrics?.receiptIndexLookup(lookup ? "read" : "skipped");
    const [known, recent] = await Promise.all([
      lookup ? this.deps.index.get(r.receipt_id) : null,
      this.deps.assignments.recent(r.assignment_id, bySet ? undefined : () => false),
    ]);
    // What this process remembers of the assignment (it claimed it, say) only serves a new receipt of
    // the claim it knows, which a compare-and-set applies; anything else is decided on a fresh read.
    let found = await this.deps.assignments.confirm(r.assignment_id, recent, (a) => bySet && startsCompareAndSet(a, r, known, proof));
    let verdict: Verdict;
    for (;;) {
      // A receipt the assignment applied is indexed by the assignment record itself.
      const stored = known ?? (found && appliedEntry(found.value, r.receipt_id));
      if (stored) return answer(await this.replay(stored, found?.value ?? null, input, digest));
      if (!found) return answer(rejected("not_found", `assignment '${r.assignment_id}' does not exist`));
      const a = found.value;
      if (a.scope !== input.scope) return answer(rejected("out_of_scope", `assignment '${a.assignment_id}' is not in scope '${input.scope}'`));
      const claim = provenClaim(a, proof);
      if (!claim) {
        // Not indexed: a forger must not be able to squat the receipt id of the real holder. Logged (once) by the consumer.
        return answer(rejected("invalid_token", "no claim of this assignment by this executor matches the claim token"));
      }
      // A remembered assignment decides nothing before the compare-and-set (the run ended, another
      // claim holds it): a verdict reached there, a lost write's retry among them, rests on a fresh read.
      const confirmed = await this.deps.assignments.confirm(r.assignment_id, found, (remembered) => bySet && reachesCompareAndSet(remembered, claim, r));
      if (confirmed !== found) {
        found = confirmed;
        continue;
      }
      verdict = await this.apply(found, claim, input, digest);
      break;
    }
    // The assignment indexes what its compare-and-set applied (now, or just before on another gateway); an entry for a conflicting body would hide it.
    const heldByAssignment = r.kind !== "progress" && (verdict.status === "recorded" || verdict.code === "receipt_conflict");
    if (heldByAssignment || verdict.indexed || verdict.status === "duplicate") return answer(verdict);
    const entry: ReceiptIndexEntry = {
      receipt_id: r.receipt_id,
      assignment_id: r.assignment_id,
      executor_id: r.executor_id,
      kind: r.kind,
      body_digest: digest,
      status: verdict.status,
      ...(verdict.code ? { code: verdict.code } : {}),
      ...(verdict.reason ? { reason: verdict.reason } : {}),
      stream_seq: input.streamSeq,
      at: this.now(),
    };
    const standing = await this.deps.index.record(entry);
    if (standing.body_digest !== digest) return answer(rejected("receipt_conflict", `receipt '${r.receipt_id}' was already stored with another body`));
    return answer(verdict);
  }

  /**
   * Whether the receipt index may already hold `input`'s receipt id, so that it must be read before
   * the receipt is decided. It cannot, and the read is skipped, when all of these hold:
   * - the id is the one `receiptId` mints for the claim the receipt proves: nobody could publish it
   *   before that claim was granted, and every receipt under it is of that claim, kind and seq;
   * - the stream de-duplicated the message on that id (`Nats-Msg-Id`), or stored it only as the first
   *   message of its subject (a chain: nothing of this executor on this assignment came before it),
   *   and this is its first delivery;
   * - it is processed within the stream's de-duplication window (less `DEDUP_MARGIN_MS`) of the
   *   claim. A message under the same id stored before this one, but after the claim, would have made
   *   the stream drop this one; one stored after it comes after this processing began, and takes
   *   the index read itself (it is outside the window), as two receipts processed at once always did.
   * What the assignment applied it answers for itself (`appliedEntry`), read or not.
   */
  private indexMayHold(input: ReceiptInput, a: AssignmentRecord, proof: ClaimProof): boolean {
    const r = input.receipt;
    if (input.redelivered || (input.msgId !== r.receipt_id && !input.firstOnSubject)) return true;
    const claim = provenClaim(a, proof);
    if (!claim || this.now() - claim.claimed_at > this.deps.dedupWindowMs - DEDUP_MARGIN_MS) return true;
    return !isClaimReceiptId(r, claim.generation);
  }

  /** A receipt id stored before (`replayed`); a `completed` that completed the assignment finishes its projection (a crash may have come first). */
  private async replay(known: ReceiptIndexEntry, a: AssignmentRecord | null, input: ReceiptInput, digest: string): Promise<Verdict> {
    const r = input.receipt;
    const verdict = replayed(known, digest, input.streamSeq);
    if (verdict.status !== "rejected" && r.kind === "completed" && a?.state === "completed" && a.final?.receipt_id === r.receipt_id)
      await this.deps.projections.ensure(a, r.result);
    // A crash may also have come between a task's receipt and its watch or history entry.
    if (verdict.status !== "rejected" && a?.final?.receipt_id === r.receipt_id) await this.deps.tasks.afterReceipt(a);
    return verdict;
  }

  private async apply(found: Versioned<AssignmentRecord>, claim: ClaimRecord, input: ReceiptInput, digest: string): Promise<Verdict> {
    const r = input.receipt;
    const a = found.value;
    if (await this.runHasEnded(a)) return runEnded(a, r.kind);
    if (claim.token_sha256 !== a.claim?.token_sha256)
      return rejected("lease_expired", `the claim of generation ${claim.generation} has expired; the assignment went back to the candidates`);
    // The digest never changes on an assignment, so checking it outside the compare-and-set is safe.
    if (r.kind === "accepted" && r.argument_digest !== a.argument_digest)
      return rejected("argument_digest_mismatch", "the accepted receipt names other arguments than the assignment's: do not start");
    if (r.kind === "progress") return this.recordProgress(found, r, claim, input.streamSeq, digest);

    const applied: AppliedReceipt = { receipt_id: r.receipt_id, kind: r.kind, body_digest: digest, stream_seq: input.streamSeq, at: this.now() };
    const res = await this.deps.assignments.mutate(a.assignment_id, (cur) => this.settle(cur, r, claim, applied), found);
    if (!res) return rejected("not_found", `assignment '${a.assignment_id}' does not exist`);
    await this.afterApplied(r, res);
    return res.result;
  }

  /**
   * Receipts sent right behind one another (each naming the one before, `Tg-After`), applied by one
   * compare-and-set: one write and one reply instead of one each. The chains taken (`togetherShape`):
   * a progress report and the final receipt; a read's `accepted` with its report, its final
   * receipt or both (a read runs before `accepted` is answered: nothing it does waits for the
   * confirmation). Only when all are new receipts of the assignment's claim (the receipt index
   * cannot hold them: see `indexMayHold`), every one of them is recorded, and the record has room
   * for the report. Otherwise null, and nothing was written: each is then processed on its own, in
   * order.
   */
  async processTogether(chain: readonly ReceiptInput[]): Promise<ReceiptAnswer[] | null> {
    const [first] = chain;
    if (!first || !togetherShape(chain.map((input) => input.receipt.kind)) || !this.deps.progress.carriedByRecords) return null;
    // One sender: the same subject (scope and executor) and claim token, so one claim proof holds for all.
    const fromSender = (input: ReceiptInput) =>
      !subjectMismatch(input) &&
      input.scope === first.scope &&
      input.subjectExecutorId === first.subjectExecutorId &&
      input.receipt.assignment_id === first.receipt.assignment_id &&
      input.receipt.claim_token === first.receipt.claim_token;
    if (!chain.every(fromSender)) return null;
    const digests = chain.map((input) => bodyDigestOf(input.receipt));
    if (!digests.every((digest): digest is string => typeof digest === "string")) return null;
    const assignmentId = first.receipt.assignment_id;
    const found = await this.deps.assignments.recent(assignmentId);
    const proof: ClaimProof = { executor_id: first.receipt.executor_id, matches: claimTokenMatcher(first.receipt.claim_token) };
    const claim = found && provenClaim(found.value, proof);
    if (!found || found.value.scope !== first.scope || !claim) return null;
    if (chain.some((input) => this.indexMayHold(input, found.value, proof))) return null;
    const r = first.receipt;
    if (r.kind === "accepted" && r.argument_digest !== found.value.argument_digest) return null;
    const at = this.now();
    const res = await this.deps.assignments.mutate(
      assignmentId,
      (cur): Decision<AssignmentRecord, Verdict[] | null> => {
        // Only a read's `accepted` is applied with what the executor did behind it.
        if (r.kind === "accepted" && cur.tool_kind !== "read") return { result: null };
        let decision: Decision<AssignmentRecord, Verdict | null> = { write: cur, result: null };
        const verdicts: Verdict[] = [];
        for (const [i, input] of chain.entries()) {
          const receipt = input.receipt;
          const stored = { body_digest: digests[i]!, stream_seq: input.streamSeq, at };
          decision =
            receipt.kind === "progress"
              ? this.logProgress(decision.write!, receipt, claim, stored)
              : this.settle(decision.write!, receipt, claim, { receipt_id: receipt.receipt_id, kind: receipt.kind, ...stored });
          if (!decision.write || decision.result?.status !== "recorded") return { result: null };
          verdicts.push(decision.result);
        }
        return { ...decision, result: verdicts };
      },
      found,
    );
    if (!res?.written || !res.result) return null;
    const verdicts = res.result;
    for (const _ of chain) this.deps.metrics?.receiptIndexLookup("skipped");
    const last = chain[chain.length - 1]!.receipt;
    // A report's compare-and-set has nothing to follow it; a final receipt's and `accepted`'s do.
    if (last.kind !== "progress") await this.afterApplied(last, { ...res, result: verdicts[verdicts.length - 1]! });
    return chain.map((input, i) => answerTo(input.receipt, verdicts[i]!));
  }

  /**
   * A chain (a read's `accepted` and what the read sent behind it, in one message: see
   * `src/wire/receipt-chains.ts`): applied whole by one compare-and-set, else its first receipt is
   * decided alone and the others are answered `pending` with nothing of them stored, for the
   * executor to send alone. So no receipt of a chain but its first, whose id is the message's
   * `Nats-Msg-Id`, is ever refused or indexed from it: one sent alone later is de-duplicated, or
   * decided, exactly as if the chain had held its first receipt only. A chain delivered again after
   * it was applied whole is answered from the record, as the first time (`replayedChain`).
   */
  async processChain(chain: readonly ReceiptInput[]): Promise<ReceiptAnswer[]> {
    const together = chainShape(chain.map((input) => input.receipt.kind)) ? await this.processTogether(chain) : null;
    if (together) return together;
    const [first, ...rest] = chain;
    const answer = await this.process(first!);
    return [answer, ...((await this.replayedChain(rest)) ?? rest.map((input) => notTaken(input.receipt)))];
  }

  /**
   * The answers to a chain's receipts after its first when the assignment applied every one of them
   * from this very message (its stream sequence, the same body): the chain was applied whole before,
   * and this is its message delivered again. Else null.
   */
  private async replayedChain(rest: readonly ReceiptInput[]): Promise<ReceiptAnswer[] | null> {
    const [next] = rest;
    // Only a chain's first delivery is applied whole (see `indexMayHold`): only a redelivery can find it applied.
    if (!next?.redelivered) return null;
    const digests = rest.map((input) => bodyDigestOf(input.receipt));
    /** Their entries on `a` when it applied every one of them from this message, with its body; else null. */
    const appliedHere = (a: AssignmentRecord): ReceiptIndexEntry[] | null => {
      const held = rest.map((input) => appliedEntry(a, input.receipt.receipt_id));
      return held.every((e, i): e is ReceiptIndexEntry => e?.stream_seq === rest[i]!.streamSeq && e.body_digest === digests[i]) ? held : null;
    };
    // What an assignment applied stays on its record: a remembered one that holds them is as good as a fresh read.
    const found = await this.deps.assignments.recent(next.receipt.assignment_id, (a) => appliedHere(a) !== null);
    const held = found && appliedHere(found.value);
    if (!found || !held) return null;
    return Promise.all(held.map(async (entry, i) => answerTo(rest[i]!.receipt, await this.replay(entry, found.value, rest[i]!, entry.body_digest))));
  }

  /** What a receipt other than progress does to the assignment as it stands (`apply`'s compare-and-set). */
  private settle(cur: AssignmentRecord, r: Receipt, claim: ClaimRecord, applied: AppliedReceipt): Decision<AssignmentRecord, Verdict> {
    const settled = decidedOnCurrent(cur, r, claim, applied.body_digest, applied.stream_seq);
    if (settled) return { result: settled };
    if (r.kind === "accepted" && cur.state === "claimed" && this.now() > claim.lease_expires_at)
      return { result: rejected("lease_expired", "the lease ran out before `accepted` was processed: claim again") };
    const to = nextAssignmentState(cur.state, EVENT_BY_KIND[r.kind]);
    if (!to) return { result: rejected("illegal_transition", `a ${r.kind} receipt cannot move an assignment that is ${cur.state}`) };
    // A settlement replaces a submission or a `reconciliation_required`, which stay answerable among `replaced`.
    const next: AssignmentRecord =
      r.kind === "accepted"
        ? { ...cur, state: to, accepted: applied, updated_at: applied.at }
        : r.kind === "submission"
          ? BackgroundTasks.submitted(cur, r, to, applied)
          : { ...cur, state: to, final: applied, outcome: outcomeOf(r), ...replacing(cur, cur.final), updated_at: applied.at };
    // The completing write carries the projection (store layout 2).
    if (r.kind === "completed" && to === "completed") return { ...this.deps.projections.carrying(next, r.receipt_id, r.result), result: RECORDED };
    return { write: next, result: RECORDED };
  }

  /** What follows a receipt's compare-and-set: the watch released, a task's bookkeeping, the projection stored. */
  private async afterApplied(r: Receipt, res: { result: Verdict; value: AssignmentRecord; written: boolean }): Promise<void> {
    const assignmentId = res.value.assignment_id;
    // Confirmed work keeps the claim's watch, which now checks on its executor's presence (detach on expiry).
    // Settled (or waiting for reconciliation): no sweeper has anything left to do with it.
    // A submitted task is watched by its deadline instead (`afterReceipt`).
    // The answer does not wait for the watch to go, nor asks the server to say it went (see `releaseUnanswered`).
    if (res.written && r.kind !== "accepted" && r.kind !== "submission")
      this.deps.watchlist.releaseUnanswered(assignmentId, (err) =>
        this.deps.log.warn({ err, assignment_id: assignmentId }, "watch of a settled assignment not released; a sweeper drops it"),
      );
    const task = res.result.status === "recorded" ? this.deps.tasks.afterReceipt(res.value) : undefined;
    if (res.result.status === "recorded" && res.value.state === "completed" && r.kind === "completed") {
      // This receipt just completed it: nobody can have stored its projection before (create-only
      // anyway); under store layout 2 its write carried it, and nothing is left to store.
      const stored = res.written ? this.deps.projections.store(res.value, r.result) : this.deps.projections.ensure(res.value, r.result);
      await Promise.all([stored, task]);
    } else await task;
  }

  /**
   * Whether the run's end has reached the assignment: it settled it (withdrawn, revoked, abandoned),
   * or, for one waiting for reconciliation (the one open state an end leaves as it is), the run is
   * ending or over. A compensation is its own operation, whatever its run.
   */
  private async runHasEnded(a: AssignmentRecord): Promise<boolean> {
    if (a.compensates !== null) return false;
    if (isRunEndState(a.state)) return true;
    if (a.state !== "reconciliation_required") return false;
    return !runTakesWork(a, (await this.deps.runs.get(a.run_id))?.value ?? null);
  }

  /**
   * Stores a progress report once per seq. From store layout 4 the assignment's compare-and-set
   * records it in the record, which then answers for its receipt as it does for `accepted`; a report
   * the record has no room for is an entry of the bucket. A bucket entry that also stands as its
   * receipt's index entry (`ProgressStore.entryOf`) answers for a resend itself. The same seq from
   * another receipt is a conflict.
   */
  private async recordProgress(
    found: Versioned<AssignmentRecord>,
    r: Extract<Receipt, { kind: "progress" }>,
    claim: ClaimRecord,
    streamSeq: number,
    digest: string,
  ): Promise<Verdict> {
    const stored = { body_digest: digest, stream_seq: streamSeq, at: this.now() };
    let a = found.value;
    if (this.deps.progress.carriedByRecords) {
      // Its event is the record's (`assignmentEvents`: the entry the write added).
      const res = await this.deps.assignments.mutate(a.assignment_id, (cur) => this.logProgress(cur, r, claim, stored), found);
      if (!res) return rejected("not_found", `assignment '${a.assignment_id}' does not exist`);
      if (res.result) return res.result;
      a = res.value;
    }
    const refusal = progressRefusal(a);
    if (refusal) return refusal;
    const entry = this.deps.progress.entryOf(r, claim.generation, stored);
    const { created, standing } = await this.deps.progress.record(entry);
    if (standing.receipt_id !== r.receipt_id) return progressConflict(r.seq);
    if (created) this.deps.events.publish([progressEvent(a.run_id, entry)]);
    const indexedBy = progressIndexEntry(standing);
    if (!indexedBy) return RECORDED;
    // Stored before (the same message on another gateway, or a resend): its entry answers as the index would.
    return { ...(created ? RECORDED : replayed(indexedBy, digest, streamSeq)), indexed: true };
  }

  /**
   * A progress report in the assignment's record (store layout 4), decided on the record as it
   * stands; `null` (with the record marked once) when the record has no room for it: the bucket takes
   * it and every later report of the call.
   */
  private logProgress(
    cur: AssignmentRecord,
    r: Extract<Receipt, { kind: "progress" }>,
    claim: ClaimRecord,
    stored: { body_digest: string; stream_seq: number; at: number },
  ): Decision<AssignmentRecord, Verdict | null> {
    const settled = decidedOnCurrent(cur, r, claim, stored.body_digest, stored.stream_seq);
    if (settled) return { result: settled };
    const refusal = progressRefusal(cur);
    if (refusal) return { result: refusal };
    if (cur.progress_log?.some((p) => p.seq === r.seq)) return { result: progressConflict(r.seq) };
    const entry = this.deps.progress.carriedEntry(cur, r, stored);
    if (entry) return { write: { ...cur, progress_log: [...(cur.progress_log ?? []), entry] }, result: { ...RECORDED, indexed: true } };
    return cur.progress_in_bucket ? { result: null } : { write: { ...cur, progress_in_bucket: true }, result: null };
  }
}

/**
 * What a compare-and-set decider answers before looking at the receipt's own edge, on the current
 * value: a receipt the assignment applied already (it is indexed there), the run's end that got
 * there first (the compare-and-set that settled it ordered the two), a claim that expired meanwhile.
 */
function decidedOnCurrent(cur: AssignmentRecord, r: Receipt, claim: ClaimRecord, digest: string, streamSeq: number): Verdict | undefined {
  const held = appliedEntry(cur, r.receipt_id);
  if (held) return { ...replayed(held, digest, streamSeq), indexed: true };
  if (isRunEndState(cur.state)) return runEnded(cur, r.kind);
  if (cur.claim?.token_sha256 !== claim.token_sha256) return rejected("lease_expired", "the claim expired while this receipt was processed");
  return undefined;
}

/** Progress is taken while the work runs (or its task does); before `accepted` was confirmed it is refused, after the end kept for audit only. */
function progressRefusal(a: AssignmentRecord): Verdict | null {
  if (a.state === "running" || a.state === "submitted") return null;
  if (a.state === "claimed") return rejected("illegal_transition", "progress before `accepted` was confirmed");
  return { status: "late_ignored", reason: `the assignment is already ${a.state}; the progress is stored in the stream only` };
}

function progressConflict(seq: number): Verdict {
  return rejected("progress_conflict", `progress seq ${seq} was already reported by another receipt`);
}

/** Whether `r` is applied by a compare-and-set of its assignment: every receipt but progress, and progress too from store layout 4. */
function appliedBySet(r: Receipt, progressBySet: boolean): boolean {
  return r.kind !== "progress" || progressBySet;
}

/** Whether a remembered assignment may decide `r`: a receipt not stored before, applied by compare-and-set, of a claim it holds. */
function startsCompareAndSet(a: AssignmentRecord, r: Receipt, indexed: ReceiptIndexEntry | null, proof: ClaimProof): boolean {
  return indexed === null && appliedEntry(a, r.receipt_id) === null && provenClaim(a, proof) !== null;
}

/**
 * Whether `apply` takes `r` to the assignment's compare-and-set (which decides on the current value)
 * rather than answering before it; one waiting for reconciliation asks its run first, on a fresh read.
 */
function reachesCompareAndSet(a: AssignmentRecord, claim: ClaimRecord, r: Receipt): boolean {
  return (
    (a.compensates !== null || (!isRunEndState(a.state) && a.state !== "reconciliation_required")) &&
    claim.token_sha256 === a.claim?.token_sha256 &&
    (r.kind !== "progress" || progressRefusal(a) === null) &&
    (r.kind !== "accepted" || r.argument_digest === a.argument_digest)
  );
}

/** What a receipt presents as proof of its claim: its executor, and its token (hashed once per receipt, however often compared). */
interface ClaimProof {
  executor_id: string;
  matches: (tokenSha256: string) => boolean;
}

/** The claim the receipt proves (current or an earlier one), by executor and constant-time token comparison. */
function provenClaim(a: AssignmentRecord, proof: ClaimProof): ClaimRecord | null {
  for (const claim of a.claim ? [a.claim, ...a.past_claims] : a.past_claims) {
    if (claim.executor_id === proof.executor_id && proof.matches(claim.token_sha256)) return claim;
  }
  return null;
}

/**
 * A receipt id stored before (indexed, or applied by its assignment): another body is a conflict; the
 * same body gets the stored answer again, `duplicate` for a recorded one unless this is the very
 * message that recorded it, redelivered (processing a message twice yields the same answer).
 */
function replayed(known: ReceiptIndexEntry, digest: string, streamSeq: number): Verdict {
  if (known.body_digest !== digest) return rejected("receipt_conflict", `receipt '${known.receipt_id}' was already stored with another body`);
  if (known.status === "recorded" && known.stream_seq !== streamSeq) return { status: "duplicate", reason: "already recorded; nothing changed" };
  return { status: known.status, ...(known.code ? { code: known.code } : {}), ...(known.reason ? { reason: known.reason } : {}) };
}

/** The answer to a receipt the run's end reached first: the executor must not start; anything else is kept for audit only. */
function runEnded(a: AssignmentRecord, kind: ReceiptKind): Verdict {
  if (kind === "accepted") return rejected("run_terminated", `run '${a.run_id}' has ended: do not start`);
  return { status: "late_ignored", code: "run_terminated", reason: `run '${a.run_id}' has ended; the receipt is stored and changes nothing` };
}

function outcomeOf(r: Receipt): Outcome {
  switch (r.kind) {
    case "refused":
      return { kind: "failed", error: r.error };
    case "failed":
    case "reconciliation_required":
      return { kind: r.kind, error: r.error };
    case "cancelled":
      return { kind: "cancelled", reason: r.reason };
    default:
      return { kind: "completed" };
  }
}

/** The answer to `r`: its verdict, without what only the processor needs. */
function answerTo(r: Receipt, verdict: Verdict): ReceiptAnswer {
  const { indexed: _indexed, ...v } = verdict;
  return { receipt_id: r.receipt_id, assignment_id: r.assignment_id, kind: r.kind, ...v };
}

/** The answer to a receipt of a chain not applied whole: not taken, nothing of it stored; the executor sends it alone. */
function notTaken(r: Receipt): ReceiptAnswer {
  return {
    receipt_id: r.receipt_id,
    assignment_id: r.assignment_id,
    kind: r.kind,
    status: "pending",
    reason: "sent in a chain that was not applied whole: send it alone",
  };
}

/** Why the receipt does not belong on the subject it came on (another assignment's, another executor's), or null. */
function subjectMismatch(input: ReceiptInput): string | null {
  if (input.receipt.assignment_id !== input.subjectAssignmentId) return "published on the subject of another assignment";
  // Only this executor may publish on its subject (NATS permissions); the body must not speak for another.
  if (input.receipt.executor_id !== input.subjectExecutorId) return "published on the subject of another executor";
  return null;
}

/** The receipt's body digest, or why its body is not representable as JSON. */
function bodyDigestOf(r: Receipt): string | CanonicalJsonError {
  try {
    return receiptBodyDigest(r);
  } catch (err) {
    if (err instanceof CanonicalJsonError) return err;
    throw err;
  }
}
