import { createHash } from "node:crypto";
import { buildContextPreview, canonicalJson, compactByteLength } from "../budget/index.js";
import { isTerminalAssignmentState } from "../execution/model/assignment-states.js";
import type { AssignmentRecord, ProgressEntry, ReceiptIndexEntry, RunRecord } from "../execution/model/records.js";
import { claimTokenMatches } from "../execution/claims/claim-token.js";
import { appliedEntries, progressIndexEntry } from "../execution/receipts/receipt-index.js";
import { receiptBodyDigest } from "../wire/digest.js";
import type { ExecutorEvidence, RegistryHistory, Stamped, StoredHistory, StoredReceipt } from "./history.js";

/** The rules, one code each; docs/reliability.md explains every one. */
export const RULES = [
  "call_not_settled",
  "orphan_call",
  "duplicate_side_effect",
  "unconfirmed_side_effect",
  "missing_side_effect",
  "receipt_lost",
  "receipt_not_indexed",
  "chain_split",
  "index_mismatch",
  "applied_receipt_mismatch",
  "state_receipt_mismatch",
  "receipt_applied_twice",
  "progress_mismatch",
  "run_end_inconsistent",
  "call_after_run_end",
  "receipt_applied_after_run_end",
  "projection_missing",
  "projection_mismatch",
  "projection_over_budget",
  "projection_changed",
  "create_only_rewritten",
  "claim_not_granted",
  "task_mismatch",
  "task_result_missing",
  "task_result_mismatch",
] as const;
export type Rule = (typeof RULES)[number];

export interface Violation {
  rule: Rule;
  message: string;
  run_id?: string;
  assignment_id?: string;
  receipt_id?: string;
  operation_key?: string;
}

export interface CheckReport {
  ok: boolean;
  counts: {
    runs: Record<string, number>;
    tool_calls: Record<string, number>;
    receipts_in_stream: number;
    receipt_index: Record<string, number>;
    /** Receipts the tool calls applied that have no index entry (the assignment record is their index). */
    applied_receipts: number;
    /** Progress receipts indexed by their own progress entry (store layout 3), with no index entry. */
    indexed_by_progress: number;
    /** Progress reports their assignment record carries (store layout 4), each applied by its compare-and-set. */
    progress_in_records: number;
    /** Progress reports in all: the bucket's entries and those in records. */
    progress: number;
    projections: number;
    /** Settlements of background tasks, each a history entry of its run. */
    task_results: number;
    side_effects: number;
    outbox_receipts: number;
  };
  violations: Violation[];
}

/** Digests of stored projections by assignment id, kept between checks to prove none ever changed. */
export type ProjectionSnapshot = Record<string, string>;

export interface CheckOptions {
  evidence?: ExecutorEvidence;
  /** Projection digests from an earlier check: any stored projection that differs now is a violation. */
  snapshot?: ProjectionSnapshot;
}

/** A receipt kind that ends an assignment's current claim, and the state it leads to. */
const FINAL_KINDS = new Set(["completed", "failed", "cancelled", "reconciliation_required"]);
/** States in which the gateway has confirmed `accepted` (side effects may have started). */
const CONFIRMED_STATES = new Set(["running", "submitted", "completed", "failed", "cancelled", "reconciliation_required", "abandoned"]);

export function projectionDigest(preview: unknown): string {
  return createHash("sha256").update(canonicalJson(preview)).digest("hex");
}

/**
 * Reads a stored history and says what it violates. Nothing here trusts a status the gateway
 * wrote about itself when the raw material is at hand: digests are recomputed from the stream,
 * tokens are matched against the stored claims, budgets re-measured with the budget engine, and
 * side effects counted in the executors' own ledgers.
 */
export function checkHistory(h: StoredHistory, options: CheckOptions = {}): CheckReport {
  const evidence = options.evidence;
  const violations: Violation[] = [];
  const add = (v: Violation) => violations.push(v);

  const runs = new Map(h.runs.map((r) => [r.value.run_id, r]));
  const assignments = new Map(h.assignments.map((a) => [a.value.assignment_id, a.value]));
  const bySeq = receiptsBySeq(h.receipts);
  const inStream = new Set(h.receipts.flatMap((r) => (r.receipt ? [r.receipt.receipt_id] : [])));
  // A progress receipt under its claim-bound id may be indexed by its progress entry (store layout 3).
  const byProgress = h.progress.flatMap((p) => progressIndexEntry(p) ?? []);
  // Progress reports: the bucket's entries and those the assignment records carry (store layout 4, applied entries of their record).
  const progress = [...h.progress, ...h.assignments.flatMap(({ value: a }) => a.progress_log ?? [])];
  const indexEntries = [...h.index, ...byProgress];
  const index = new Map(indexEntries.map((e) => [e.receipt_id, e]));
  // A receipt its assignment applied has no index entry of its own (the record is its index); older histories have both.
  const applied = h.assignments.flatMap(({ value: a }) => appliedEntries(a).filter((e) => index.get(e.receipt_id)?.assignment_id !== a.assignment_id));
  const knownByAssignment = groupBy([...indexEntries, ...applied], (e) => e.assignment_id);
  const known: Known = (receiptId, assignmentId) => index.get(receiptId) ?? knownByAssignment.get(assignmentId)?.find((e) => e.receipt_id === receiptId);

  for (const { value: a } of h.assignments) {
    checkSettled(a, add);
    checkListed(a, runs.get(a.run_id)?.value, assignments, add);
    checkStateAgainstReceipts(a, add);
    checkApplied(a, index, bySeq, add);
    checkAppliedOnce(a, knownByAssignment.get(a.assignment_id) ?? [], add);
    checkTask(a, runs.get(a.run_id)?.value, bySeq, add);
  }
  for (const { value: run } of h.runs) checkTaskResults(run, assignments, add);
  if (h.registry) checkClaimsGranted(h.assignments, h.registry, add);
  checkIndex([...indexEntries, ...applied.filter((e) => e.kind === "progress")], bySeq, add);
  checkEveryReceiptIndexed(h.receipts, bySeq, assignments, known, add);
  checkChains(bySeq, known, add);
  checkProgress(progress, h.index, known, add);
  for (const run of h.runs) checkRunEnd(run, assignments, knownByAssignment, bySeq, add);
  checkProjections(h, assignments, options.snapshot, add);
  for (const bucket of h.createOnly) {
    const expected = bucket.lastSeq === 0 ? 0 : bucket.lastSeq - bucket.firstSeq + 1;
    if (bucket.firstSeq > 1 || bucket.messages !== expected)
      add({
        rule: "create_only_rewritten",
        message: `create-only bucket ${bucket.bucket} holds ${bucket.messages} of sequences ${bucket.firstSeq}..${bucket.lastSeq}: an entry was overwritten or deleted`,
      });
  }
  if (evidence) {
    checkSideEffects(evidence, assignments, add);
    checkOutbox(evidence, inStream, known, add);
  }

  return {
    ok: violations.length === 0,
    counts: {
      runs: tally(h.runs.map((r) => r.value.state)),
      tool_calls: tally(h.assignments.map((a) => a.value.state)),
      receipts_in_stream: h.receipts.length,
      receipt_index: tally(h.index.map((e) => e.status)),
      applied_receipts: applied.length,
      indexed_by_progress: byProgress.length,
      progress_in_records: progress.length - h.progress.length,
      progress: progress.length,
      projections: h.projections.length,
      task_results: h.runs.reduce((n, r) => n + (r.value.task_results?.length ?? 0), 0),
      side_effects: evidence?.sideEffects.length ?? 0,
      outbox_receipts: evidence?.outbox.length ?? 0,
    },
    violations,
  };
}

type Add = (v: Violation) => void;

/**
 * Every claim (current and past) was made by an executor the registry granted the assignment's
 * binding in its scope. Judged against every revision the registry keeps, so a claim made while a
 * later-changed registration granted it passes; an executor whose key may have lost older revisions
 * (as many kept as the bucket keeps) is not judged.
 */
function checkClaimsGranted(assignments: ReadonlyArray<Stamped<AssignmentRecord>>, registry: RegistryHistory, add: Add): void {
  const byExecutor = groupBy(registry.revisions, (r) => r.executor_id);
  for (const { value: a } of assignments) {
    for (const claim of a.claim ? [a.claim, ...a.past_claims] : a.past_claims) {
      const revisions = byExecutor.get(claim.executor_id) ?? [];
      if (revisions.length >= registry.keep) continue;
      if (revisions.some((r) => r.value?.scope === a.scope && (r.value.bindings ?? []).includes(a.binding_id))) continue;
      add({
        rule: "claim_not_granted",
        message: `claim of generation ${claim.generation} by executor '${claim.executor_id}', which the registry never granted binding '${a.binding_id}' in scope '${a.scope}'`,
        run_id: a.run_id,
        assignment_id: a.assignment_id,
      });
    }
  }
}
/** The index entry of a receipt, or the one its assignment's applied receipt stands for. */
type Known = (receiptId: string, assignmentId: string) => ReceiptIndexEntry | undefined;

function checkSettled(a: AssignmentRecord, add: Add): void {
  if (!isTerminalAssignmentState(a.state) && a.state !== "reconciliation_required")
    add({
      rule: "call_not_settled",
      message: `tool call is ${a.state}: neither terminal nor reconciliation_required`,
      run_id: a.run_id,
      assignment_id: a.assignment_id,
    });
}

function checkListed(a: AssignmentRecord, run: RunRecord | undefined, assignments: Map<string, AssignmentRecord>, add: Add): void {
  // An assignment its run never listed is legitimate only when it was withdrawn before any claim (its offer, if any, taken back),
  // or when it is a compensation: it hangs off its original (linked both ways), not off the run's list.
  if (!run) add({ rule: "orphan_call", message: `run ${a.run_id} does not exist`, run_id: a.run_id, assignment_id: a.assignment_id });
  else if (a.compensates !== null) {
    if (assignments.get(a.compensates)?.compensated_by !== a.assignment_id)
      add({
        rule: "orphan_call",
        message: `compensation of ${a.compensates}, which does not link back to it`,
        run_id: a.run_id,
        assignment_id: a.assignment_id,
      });
  } else if (!run.assignment_ids.includes(a.assignment_id) && !(a.state === "withdrawn" && a.claim === null))
    add({ rule: "orphan_call", message: `the run does not list this ${a.state} tool call`, run_id: a.run_id, assignment_id: a.assignment_id });
}

function checkStateAgainstReceipts(a: AssignmentRecord, add: Add): void {
  const bad = (message: string) => add({ rule: "state_receipt_mismatch", message, run_id: a.run_id, assignment_id: a.assignment_id });
  // A refusal (`claimed --refuse--> failed`) ends a claim that was never confirmed.
  const refused = a.state === "failed" && a.final?.kind === "refused";
  if ((CONFIRMED_STATES.has(a.state) && !refused) !== (a.accepted !== null)) bad(`state ${a.state} with ${a.accepted ? "an" : "no"} applied accepted receipt`);
  // `running --detach--> reconciliation_required` moves on no receipt: the executor left; `submitted --expire_task-->` neither: the deadline passed.
  const detached =
    a.state === "reconciliation_required" && (a.final === null || a.final.kind === "submission") && a.outcome?.kind === "reconciliation_required";
  if (detached) {
    if (a.outcome?.kind !== "reconciliation_required") bad(`state ${a.state} but the outcome is ${a.outcome?.kind ?? "missing"}`);
  } else if (FINAL_KINDS.has(a.state)) {
    if (a.final?.kind !== a.state && !refused) bad(`state ${a.state} but the applied final receipt is ${a.final?.kind ?? "missing"}`);
    if (a.outcome?.kind !== a.state) bad(`state ${a.state} but the outcome is ${a.outcome?.kind ?? "missing"}`);
  } else if (a.state === "submitted" || (a.state === "abandoned" && a.task)) {
    // The submission sits where a final receipt would, and says nothing final.
    if (a.final?.kind !== "submission" || a.outcome !== null)
      bad(`state ${a.state} after a submission, but the applied receipt is ${a.final?.kind ?? "missing"} with outcome ${a.outcome?.kind ?? "none"}`);
  } else if (a.final !== null || a.outcome !== null) bad(`state ${a.state} with a final receipt applied`);
  // Only a pending tool call (or one withdrawn while pending) holds no claim.
  if ((a.state === "pending" || a.state === "withdrawn") !== (a.claim === null)) bad(`state ${a.state} ${a.claim ? "with" : "without"} a current claim`);
}

/** The receipts an assignment says it applied are in the stream with the same body, and indexed, if at all, as recorded. */
function checkApplied(a: AssignmentRecord, index: Map<string, ReceiptIndexEntry>, bySeq: ReceiptsBySeq, add: Add): void {
  for (const applied of [a.accepted, a.final, ...(a.replaced ?? [])]) {
    if (!applied) continue;
    const bad = (message: string) =>
      add({ rule: "applied_receipt_mismatch", message, run_id: a.run_id, assignment_id: a.assignment_id, receipt_id: applied.receipt_id });
    // An operator's settlement is no executor receipt (no claim proof, no index entry): it must be in the stream.
    if (applied === a.final && a.settled_by !== null) {
      if (!bySeq.has(applied.stream_seq)) bad(`operator settlement is not at stream sequence ${applied.stream_seq}`);
      continue;
    }
    const stored = receiptAt(bySeq, applied);
    if (!stored) bad(`applied ${applied.kind} receipt is not at stream sequence ${applied.stream_seq}`);
    else if (digestOf(stored) !== applied.body_digest) bad(`applied ${applied.kind} receipt's body digest differs from the stream's copy`);
    // The assignment is its index; an entry besides it (written before that was so) must say the same.
    const entry = index.get(applied.receipt_id);
    if (entry && (entry.status !== "recorded" || entry.body_digest !== applied.body_digest))
      bad(`applied ${applied.kind} receipt is indexed as ${entry.status}${entry.body_digest === applied.body_digest ? "" : " with another body"}`);
  }
}

/** No accepted recorded twice, no second final receipt recorded (beyond the settling of a reconciliation). */
function checkAppliedOnce(a: AssignmentRecord, entries: ReceiptIndexEntry[], add: Add): void {
  const recorded = entries.filter((e) => e.status === "recorded");
  const accepted = recorded.filter((e) => e.kind === "accepted");
  const finals = recorded.filter((e) => FINAL_KINDS.has(e.kind));
  const twice = (message: string) => add({ rule: "receipt_applied_twice", message, run_id: a.run_id, assignment_id: a.assignment_id });
  // A read offered again after its executor left (`retry_read`) was confirmed once per claim; anything else once.
  const retriedRead = a.tool_kind === "read" && a.past_claims.length > 0;
  const allowed = retriedRead ? a.past_claims.length + 1 : 1;
  if (accepted.length > allowed) twice(`${accepted.length} accepted receipts recorded: ${accepted.map((e) => e.receipt_id).join(", ")}`);
  if (!retriedRead && accepted.length === 1 && accepted[0]!.receipt_id !== a.accepted?.receipt_id)
    twice(`recorded accepted ${accepted[0]!.receipt_id} is not the one the assignment holds`);
  const settling = finals.filter((e) => e.kind !== "reconciliation_required");
  if (settling.length > 1) twice(`${settling.length} final receipts recorded: ${settling.map((e) => e.receipt_id).join(", ")}`);
  if (finals.length > 0 && a.settled_by === null && !finals.some((e) => e.receipt_id === a.final?.receipt_id))
    twice(`recorded final receipts do not include the one the assignment holds`);
}

/**
 * A background task: the assignment holds one iff a `submission` was applied (it sits in `final`, or
 * among `replaced` once something settled the task), with the task reference and status of that
 * receipt as the stream holds it; and every settlement of a task (a final receipt, or the deadline)
 * is a task result of its run, exactly once.
 */
function checkTask(a: AssignmentRecord, run: RunRecord | undefined, bySeq: ReceiptsBySeq, add: Add): void {
  const bad = (rule: Rule, message: string) => add({ rule, message, run_id: a.run_id, assignment_id: a.assignment_id });
  const submissions = [a.final, ...(a.replaced ?? [])].filter((r) => r?.kind === "submission");
  if (submissions.length > 1) bad("receipt_applied_twice", `${submissions.length} submissions applied`);
  const submission = submissions[0];
  if (!a.task) {
    if (submission) bad("task_mismatch", `submission ${submission.receipt_id} applied but the tool call holds no task`);
    return;
  }
  if (!submission) return bad("task_mismatch", `tool call holds task '${a.task.task_ref}' but no submission was applied`);
  const stored = receiptAt(bySeq, submission);
  if (stored?.kind === "submission" && (stored.task_ref !== a.task.task_ref || stored.status !== a.task.status))
    bad("task_mismatch", `task '${a.task.task_ref}' differs from its submission in the stream ('${stored.task_ref}')`);
  if (a.state === "submitted" || a.state === "abandoned" || !a.outcome || !run) return;
  const results = (run.task_results ?? []).filter((t) => t.assignment_id === a.assignment_id);
  const settledBy = a.final?.kind === "submission" ? null : (a.final?.receipt_id ?? null);
  if (!results.some((t) => t.receipt_id === settledBy && t.outcome.kind === a.outcome!.kind))
    bad("task_result_missing", `task '${a.task.task_ref}' is ${a.state} but its run's history has no task result for ${settledBy ?? "its deadline"}`);
}

/** Each task result of a run belongs to one of its tool calls that submitted a task, appears once, and was a settlement that task really had. */
function checkTaskResults(run: RunRecord, assignments: Map<string, AssignmentRecord>, add: Add): void {
  const seen = new Set<string>();
  for (const t of run.task_results ?? []) {
    const bad = (message: string) =>
      add({ rule: "task_result_mismatch", message, run_id: run.run_id, assignment_id: t.assignment_id, ...(t.receipt_id ? { receipt_id: t.receipt_id } : {}) });
    const key = `${t.assignment_id}/${t.receipt_id}/${t.outcome.kind}`;
    if (seen.has(key)) bad(`task result ${key} appears twice`);
    seen.add(key);
    const a = assignments.get(t.assignment_id);
    if (!a?.task || !run.assignment_ids.includes(t.assignment_id)) {
      bad("task result of a tool call of this run that submitted no task");
      continue;
    }
    if (t.after_tool_calls < run.assignment_ids.indexOf(t.assignment_id) + 1)
      bad(`task result placed after ${t.after_tool_calls} tool calls, before its own call`);
    const applied = [a.final, ...(a.replaced ?? [])].find((r) => r?.receipt_id === t.receipt_id);
    if (t.receipt_id !== null ? applied?.kind !== t.outcome.kind : t.outcome.kind !== "reconciliation_required")
      bad(`task result says ${t.outcome.kind}, which ${t.receipt_id ?? "the deadline"} did not`);
  }
}

/** Each index entry points at its own receipt in the stream, with the body digest it was indexed under. */
function checkIndex(entries: ReceiptIndexEntry[], bySeq: ReceiptsBySeq, add: Add): void {
  for (const e of entries) {
    const stored = receiptAt(bySeq, e);
    if (!stored || stored.assignment_id !== e.assignment_id)
      add({
        rule: "index_mismatch",
        message: `index entry points at stream sequence ${e.stream_seq}, which holds ${stored ? `it for ${stored.assignment_id}` : "no such receipt"}`,
        assignment_id: e.assignment_id,
        receipt_id: e.receipt_id,
      });
    else if (digestOf(stored) !== e.body_digest)
      add({
        rule: "index_mismatch",
        message: "index entry's body digest differs from the stream's copy",
        assignment_id: e.assignment_id,
        receipt_id: e.receipt_id,
      });
  }
}

/**
 * A receipt in the stream that proves a claim of its assignment must have been processed: indexed, or
 * applied by the assignment. A chain's receipts after its first are exempt (`checkChains`): a gateway
 * that does not apply a chain whole takes nothing of them from it.
 */
function checkEveryReceiptIndexed(receipts: StoredReceipt[], bySeq: ReceiptsBySeq, assignments: Map<string, AssignmentRecord>, known: Known, add: Add): void {
  for (const { receipt: r, seq } of receipts) {
    if (!r || known(r.receipt_id, r.assignment_id) || bySeq.get(seq)?.[0]?.receipt !== r) continue;
    const a = assignments.get(r.assignment_id);
    const claims = a ? (a.claim ? [a.claim, ...a.past_claims] : a.past_claims) : [];
    // Without a valid token the gateway refuses it unindexed on purpose (a forger must not squat the id).
    if (claims.some((c) => c.executor_id === r.executor_id && claimTokenMatches(r.claim_token, c.token_sha256)))
      add({
        rule: "receipt_not_indexed",
        message: `${r.kind} receipt at stream sequence ${seq} was never processed`,
        assignment_id: r.assignment_id,
        receipt_id: r.receipt_id,
      });
  }
}

/**
 * A chain (a read's first receipts in one message) is applied whole, or nothing of it but its first
 * receipt is taken from it: the others were answered `pending`, to be sent alone.
 */
function checkChains(bySeq: ReceiptsBySeq, known: Known, add: Add): void {
  for (const [seq, held] of bySeq) {
    const followers = held.slice(1).flatMap((s) => (s.receipt ? [s.receipt] : []));
    const takenHere = followers.filter((r) => known(r.receipt_id, r.assignment_id)?.stream_seq === seq);
    if (takenHere.length === 0 || takenHere.length === followers.length) continue;
    const left = followers.filter((r) => !takenHere.includes(r)).map((r) => r.receipt_id);
    add({
      rule: "chain_split",
      message: `the chain at stream sequence ${seq} was taken in part: ${left.join(", ")} not taken from it`,
      assignment_id: followers[0]!.assignment_id,
      receipt_id: left[0]!,
    });
  }
}

function checkProgress(progress: ProgressEntry[], index: ReceiptIndexEntry[], known: Known, add: Add): void {
  const seqsByReceipt = new Map<string, number[]>();
  const receiptBySeq = new Map<string, string>();
  for (const p of progress) {
    // One report per seq of an assignment, wherever it is stored.
    const place = `${p.assignment_id}.${p.seq}`;
    const other = receiptBySeq.get(place);
    if (other !== undefined && other !== p.receipt_id)
      add({
        rule: "progress_mismatch",
        message: `progress seq ${p.seq} is stored for two receipts (${other})`,
        assignment_id: p.assignment_id,
        receipt_id: p.receipt_id,
      });
    receiptBySeq.set(place, p.receipt_id);
    seqsByReceipt.set(p.receipt_id, [...(seqsByReceipt.get(p.receipt_id) ?? []), p.seq]);
    const e = known(p.receipt_id, p.assignment_id);
    if (e && (e.kind !== "progress" || e.assignment_id !== p.assignment_id))
      add({
        rule: "progress_mismatch",
        message: `progress seq ${p.seq} is stored under a ${e.kind} receipt of ${e.assignment_id}`,
        assignment_id: p.assignment_id,
        receipt_id: p.receipt_id,
      });
  }
  for (const [receiptId, seqs] of seqsByReceipt) {
    if (seqs.length > 1) add({ rule: "progress_mismatch", message: `one progress receipt stored at seqs ${seqs.join(", ")}`, receipt_id: receiptId });
  }
  for (const e of index) {
    if (e.kind === "progress" && e.status === "recorded" && !seqsByReceipt.has(e.receipt_id))
      add({
        rule: "progress_mismatch",
        message: "recorded progress receipt has no stored progress entry",
        assignment_id: e.assignment_id,
        receipt_id: e.receipt_id,
      });
  }
}

/**
 * A terminated run stays as it ended. The run's KV entry is stamped by the server when its terminal
 * state was written (the last of its end's writes: the end is recorded on the active run first, its
 * calls are settled, then the run is made terminal), and receipts by the server when they were
 * stored: a receipt stored after the terminal write must never be recorded. A receipt stored before
 * and processed while the run was ending is ordered by the assignment's compare-and-set (the end's
 * settling is one) and is not a violation.
 */
function checkRunEnd(
  run: Stamped<RunRecord>,
  assignments: Map<string, AssignmentRecord>,
  knownByAssignment: Map<string, ReceiptIndexEntry[]>,
  bySeq: ReceiptsBySeq,
  add: Add,
): void {
  const r = run.value;
  if ((r.state === "active") !== (r.ended_at === null))
    add({ rule: "run_end_inconsistent", message: `run is ${r.state} with ended_at ${r.ended_at}`, run_id: r.run_id });
  // The write that makes a run terminal removes its `ending`: a terminal run still marked so was never finished by it.
  if (r.state !== "active" && r.ending)
    add({ rule: "run_end_inconsistent", message: `run is ${r.state} and still marked ending by '${r.ending.event}'`, run_id: r.run_id });
  if (r.state === "active" || r.ended_at === null) return;
  for (const id of r.assignment_ids) {
    const a = assignments.get(id);
    if (a && a.created_at > r.ended_at)
      add({
        rule: "call_after_run_end",
        message: `tool call created ${a.created_at - r.ended_at} ms after the run ended`,
        run_id: r.run_id,
        assignment_id: id,
      });
    for (const e of knownByAssignment.get(id) ?? []) {
      const stored = bySeq.get(e.stream_seq)?.[0];
      if (e.status === "recorded" && stored && stored.storedAt > run.storedAt)
        add({
          rule: "receipt_applied_after_run_end",
          message: `${e.kind} receipt stored ${stored.storedAt - run.storedAt} ms after the run ended was recorded`,
          run_id: r.run_id,
          assignment_id: id,
          receipt_id: e.receipt_id,
        });
    }
  }
}

function checkProjections(h: StoredHistory, assignments: Map<string, AssignmentRecord>, snapshot: ProjectionSnapshot | undefined, add: Add): void {
  const projected = new Set<string>();
  for (const p of h.projections) {
    const a = assignments.get(p.assignment_id);
    const preview = p.context_preview;
    const ids = { run_id: a?.run_id, assignment_id: p.assignment_id, receipt_id: p.receipt_id };
    // Once: in the projections bucket (store layout 1) or in the record that completed the call (2), never both.
    if (projected.has(p.assignment_id)) add({ rule: "projection_changed", message: "a second projection is stored for the tool call", ...ids });
    projected.add(p.assignment_id);
    if (!a || a.state !== "completed" || a.final?.receipt_id !== p.receipt_id)
      add({
        rule: "projection_mismatch",
        message: `projection of receipt ${p.receipt_id} for a tool call that is ${a ? `${a.state} by ${a.final?.receipt_id ?? "no receipt"}` : "missing"}`,
        ...ids,
      });
    else if (preview.max_result_context_bytes !== a.max_result_context_bytes)
      add({
        rule: "projection_mismatch",
        message: `projection made with budget ${preview.max_result_context_bytes}, the tool's is ${a.max_result_context_bytes}`,
        ...ids,
      });
    // Re-measured by the budget engine: the stored figure is the real size, and projecting the stored result again cuts nothing.
    const measured = compactByteLength(preview.result);
    const again = buildContextPreview(preview.result, { maxResultContextBytes: preview.max_result_context_bytes });
    if (measured !== preview.retained_bytes || again.truncated)
      add({
        rule: "projection_over_budget",
        message: `stored result measures ${measured} bytes (recorded ${preview.retained_bytes}) against a budget of ${preview.max_result_context_bytes}`,
        ...ids,
      });
    const before = snapshot?.[p.assignment_id];
    if (before !== undefined && before !== projectionDigest(preview))
      add({ rule: "projection_changed", message: "stored projection differs from the earlier snapshot", ...ids });
  }
  for (const a of assignments.values()) {
    if (a.state === "completed" && !projected.has(a.assignment_id))
      add({ rule: "projection_missing", message: "completed tool call has no stored projection", run_id: a.run_id, assignment_id: a.assignment_id });
  }
  for (const id of Object.keys(snapshot ?? {})) {
    if (!projected.has(id)) add({ rule: "projection_changed", message: "a projection in the earlier snapshot is gone", assignment_id: id });
  }
}

function checkSideEffects(evidence: ExecutorEvidence, assignments: Map<string, AssignmentRecord>, add: Add): void {
  for (const [key, rows] of groupBy(evidence.sideEffects, (s) => s.operation_key)) {
    if (rows.length > 1)
      add({
        rule: "duplicate_side_effect",
        message: `${rows.length} side effects for one operation key (${rows.map((s) => `${s.executor_id} g${s.generation}`).join(", ")})`,
        operation_key: key,
        assignment_id: rows[0]!.assignment_id,
      });
  }
  for (const s of evidence.sideEffects) {
    const a = assignments.get(s.assignment_id);
    // Side effects may start only after the gateway confirmed this executor's accepted for this claim.
    if (!a || !a.accepted || a.claim?.executor_id !== s.executor_id || a.claim.generation !== s.generation)
      add({
        rule: "unconfirmed_side_effect",
        message: `side effect by ${s.executor_id} (generation ${s.generation}) without a confirmed claim (tool call ${a?.state ?? "missing"}, claim ${a?.claim ? `${a.claim.executor_id} g${a.claim.generation}` : "none"})`,
        operation_key: s.operation_key,
        assignment_id: s.assignment_id,
      });
  }
  const done = new Set(evidence.sideEffects.map((s) => s.assignment_id));
  const ledgers = new Set(evidence.ledgerExecutors);
  for (const a of assignments.values()) {
    if (a.state === "completed" && a.tool_kind === "write" && a.claim && ledgers.has(a.claim.executor_id) && !done.has(a.assignment_id))
      add({
        rule: "missing_side_effect",
        message: `write reported completed by ${a.claim.executor_id} but its ledger has no side effect`,
        run_id: a.run_id,
        assignment_id: a.assignment_id,
        operation_key: a.operation_key,
      });
  }
}

/** Every receipt an executor holds an answer for reached the stream and, unless refused for its token, the index or its assignment. */
function checkOutbox(evidence: ExecutorEvidence, inStream: Set<string>, known: Known, add: Add): void {
  for (const o of evidence.outbox) {
    if (o.answer_status === null) {
      // An executor stopped while the answer was in flight (e.g. its gateway was killed and the
      // receipt was redelivered to another one): delivered if the gateways processed it; its
      // outbox would only query the index on the next start.
      if (!inStream.has(o.receipt_id) || !known(o.receipt_id, o.assignment_id))
        add({
          rule: "receipt_lost",
          message: `${o.kind} receipt of ${o.executor_id} never got an answer and was not processed by any gateway`,
          assignment_id: o.assignment_id,
          receipt_id: o.receipt_id,
        });
      continue;
    }
    if (!inStream.has(o.receipt_id))
      add({
        rule: "receipt_lost",
        message: `${o.kind} receipt answered ${o.answer_status} is not in the receipts stream`,
        assignment_id: o.assignment_id,
        receipt_id: o.receipt_id,
      });
    else if (o.answer_code !== "invalid_token" && !known(o.receipt_id, o.assignment_id))
      add({
        rule: "receipt_lost",
        message: `${o.kind} receipt answered ${o.answer_status} is neither in the receipt index nor applied by its tool call`,
        assignment_id: o.assignment_id,
        receipt_id: o.receipt_id,
      });
  }
}

function digestOf(r: NonNullable<StoredReceipt["receipt"]>): string | null {
  try {
    return receiptBodyDigest(r);
  } catch {
    return null;
  }
}

function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    const list = out.get(k);
    if (list) list.push(item);
    else out.set(k, [item]);
  }
  return out;
}

function tally(values: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const v of values) out[v] = (out[v] ?? 0) + 1;
  return out;
}

/** The stream's receipts by the sequence of their message: one each, or the receipts of a chain. */
type ReceiptsBySeq = Map<number, StoredReceipt[]>;

function receiptsBySeq(receipts: readonly StoredReceipt[]): ReceiptsBySeq {
  const out: ReceiptsBySeq = new Map();
  for (const r of receipts) out.set(r.seq, [...(out.get(r.seq) ?? []), r]);
  return out;
}

/** The receipt `at` names in the stream (its message's sequence and its id), if it is there. */
function receiptAt(bySeq: ReceiptsBySeq, at: { stream_seq: number; receipt_id: string }): NonNullable<StoredReceipt["receipt"]> | undefined {
  return bySeq.get(at.stream_seq)?.find((r) => r.receipt?.receipt_id === at.receipt_id)?.receipt ?? undefined;
}
