import { describe, expect, it } from "vitest";
import { buildContextPreview } from "../../src/budget/index.js";
import { checkHistory, projectionDigest, snapshotOf, type ExecutorEvidence, type Rule, type StoredHistory } from "../../src/checker/index.js";
import { claimTokenSha256 } from "../../src/execution/claims/claim-token.js";
import type { AssignmentRecord, ReceiptIndexEntry, RunRecord } from "../../src/execution/model/records.js";
import type { Executor } from "../../src/executors/schemas.js";
import { argumentDigest, receiptBodyDigest } from "../../src/wire/digest.js";
import type { Receipt } from "../../src/wire/messages.js";

const T0 = 1_700_000_000_000;
const TOKEN = "t".repeat(43);

/**
 * A consistent history, built the way the gateway would have stored it: one run of `n` write tool
 * calls, each claimed by `exec-1`, accepted, one progress, completed and projected; the progress
 * indexed, accepted and completed held by the tool call (`indexApplied`: indexed too, as the gateway
 * did before); and the executor's ledger and outbox to match. Each test breaks one thing and expects its rule.
 */
function history(n = 3, { indexApplied = false } = {}): { h: StoredHistory; evidence: ExecutorEvidence } {
  const h: StoredHistory = { runs: [], assignments: [], receipts: [], index: [], progress: [], projections: [], createOnly: [] };
  const evidence: ExecutorEvidence = { ledgerExecutors: ["exec-1"], sideEffects: [], outboxExecutors: ["exec-1"], outbox: [] };
  const run: RunRecord = {
    run_id: "run-1",
    session_id: "s-1",
    agent: "bot",
    agent_version: "bot.1",
    toolset: "ts",
    toolset_version: "v1",
    subject: "u",
    state: "active",
    assignment_ids: [],
    created_at: T0,
    ended_at: null,
  };
  let seq = 0;
  const store = (receipt: Receipt, at: number) => {
    h.receipts.push({ seq: ++seq, storedAt: at, receipt });
    const entry: ReceiptIndexEntry = {
      receipt_id: receipt.receipt_id,
      assignment_id: receipt.assignment_id,
      executor_id: receipt.executor_id,
      kind: receipt.kind,
      body_digest: receiptBodyDigest(receipt),
      status: "recorded",
      stream_seq: seq,
      at,
    };
    if (receipt.kind === "progress" || indexApplied) h.index.push(entry);
    evidence.outbox.push({
      executor_id: receipt.executor_id,
      receipt_id: receipt.receipt_id,
      assignment_id: receipt.assignment_id,
      kind: receipt.kind,
      answer_status: "recorded",
      answer_code: null,
    });
    return { receipt_id: receipt.receipt_id, kind: receipt.kind, body_digest: entry.body_digest, stream_seq: seq, at };
  };
  for (let i = 0; i < n; i++) {
    const id = `a-${i}`;
    const base = { assignment_id: id, executor_id: "exec-1", claim_token: TOKEN };
    const at = T0 + 100 * i;
    const accepted = store(
      { ...base, receipt_id: `${id}_accepted`, kind: "accepted", operation_key: `op-${i}`, argument_digest: argumentDigest({ i }) },
      at + 1,
    );
    store({ ...base, receipt_id: `${id}_p1`, kind: "progress", seq: 1, progress: { step: 1 } }, at + 2);
    h.progress.push({ assignment_id: id, seq: 1, receipt_id: `${id}_p1`, progress: { step: 1 }, at: at + 2 });
    const result = { i, rows: "x".repeat(2_000) };
    const final = store({ ...base, receipt_id: `${id}_completed`, kind: "completed", result }, at + 3);
    const a: AssignmentRecord = {
      assignment_id: id,
      run_id: run.run_id,
      tool_call_id: null,
      tool_name: "w",
      binding_id: "b",
      scope: "s",
      tool_kind: "write",
      arguments: { i },
      argument_digest: argumentDigest({ i }),
      operation_key: `op-${i}`,
      max_result_context_bytes: 1024,
      state: "completed",
      generation: 0,
      candidate_seq: 1,
      claim: { executor_id: "exec-1", generation: 0, token_sha256: claimTokenSha256(TOKEN), claimed_at: at, lease_expires_at: at + 30_000 },
      past_claims: [],
      accepted,
      final,
      outcome: { kind: "completed" },
      task_cancel: null,
      compensates: null,
      compensated_by: null,
      settled_by: null,
      created_at: at,
      updated_at: at + 3,
    };
    h.assignments.push({ value: a, revision: i + 1, storedAt: at + 3 });
    h.projections.push({
      assignment_id: id,
      receipt_id: final.receipt_id,
      context_preview: buildContextPreview(result, { maxResultContextBytes: 1024 }),
      computed_at: at + 3,
    });
    evidence.sideEffects.push({ executor_id: "exec-1", assignment_id: id, generation: 0, operation_key: `op-${i}` });
    run.assignment_ids.push(id);
  }
  h.runs.push({ value: run, revision: 1, storedAt: T0 + 100 * n });
  h.createOnly.push({ bucket: "tg_projections", firstSeq: 1, lastSeq: n, messages: n });
  h.registry = { keep: 8, revisions: [{ executor_id: "exec-1", storedAt: T0 - 1, value: registered("exec-1", ["b"]) }] };
  return { h, evidence };
}

function registered(executorId: string, bindings: string[], scope = "s"): Executor {
  const at = new Date(T0).toISOString();
  return { executor_id: executorId, scope, nkeys: [], bindings, created_at: at, updated_at: at };
}

function rulesOf(h: StoredHistory, evidence?: ExecutorEvidence, snapshot?: Record<string, string>): Rule[] {
  return [...new Set(checkHistory(h, { evidence, snapshot }).violations.map((v) => v.rule))];
}

const assignment = (h: StoredHistory, i: number) => h.assignments[i]!.value;

/** Indexes a receipt of the stream with a verdict that applied nothing (the gateway's entry for it). */
function indexAs(h: StoredHistory, receiptId: string, verdict: Pick<ReceiptIndexEntry, "status" | "code">): void {
  const { seq, storedAt, receipt } = h.receipts.find((r) => r.receipt?.receipt_id === receiptId)!;
  const r = receipt!;
  h.index.push({
    receipt_id: r.receipt_id,
    assignment_id: r.assignment_id,
    executor_id: r.executor_id,
    kind: r.kind,
    body_digest: receiptBodyDigest(r),
    stream_seq: seq,
    at: storedAt,
    ...verdict,
  });
}

type PublishedBody = Receipt extends infer R ? (R extends Receipt ? Omit<R, "executor_id" | "claim_token"> : never) : never;

/** Appends a receipt of `exec-1` to the stream, as published (with the claim token). */
function publish(h: StoredHistory, receipt: PublishedBody): { seq: number; digest: string } {
  const full = { executor_id: "exec-1", claim_token: TOKEN, ...receipt } as Receipt;
  const seq = Math.max(...h.receipts.map((r) => r.seq)) + 1;
  h.receipts.push({ seq, storedAt: T0 + 50, receipt: full });
  return { seq, digest: receiptBodyDigest(full) };
}

describe("history checker on crafted records", () => {
  it("passes a consistent history and counts it", () => {
    const { h, evidence } = history();
    const report = checkHistory(h, { evidence, snapshot: snapshotOf(h) });
    expect(report.violations).toEqual([]);
    expect(report.ok).toBe(true);
    expect(report.counts).toMatchObject({
      tool_calls: { completed: 3 },
      receipts_in_stream: 9,
      receipt_index: { recorded: 3 },
      applied_receipts: 6,
      side_effects: 3,
      projections: 3,
    });
  });

  it("passes a history written before applied receipts were left out of the index (both hold them)", () => {
    const { h, evidence } = history(3, { indexApplied: true });
    expect(checkHistory(h, { evidence }).violations).toEqual([]);
    expect(checkHistory(h).counts).toMatchObject({ receipt_index: { recorded: 9 }, applied_receipts: 0 });
    // ... but the index and the tool call must agree.
    h.index.find((e) => e.receipt_id === "a-1_accepted")!.body_digest = "0".repeat(64);
    expect(rulesOf(h)).toContain("applied_receipt_mismatch");
  });

  it("a recorded accepted receipt neither in the index nor held by its tool call", () => {
    const { h, evidence } = history();
    // An accepted the executor was told was recorded, in the stream with a valid token: no record of it anywhere.
    publish(h, { receipt_id: "a-1_accepted_2", assignment_id: "a-1", kind: "accepted", operation_key: "op-1", argument_digest: argumentDigest({ i: 1 }) });
    evidence.outbox.push({
      executor_id: "exec-1",
      receipt_id: "a-1_accepted_2",
      assignment_id: "a-1",
      kind: "accepted",
      answer_status: "recorded",
      answer_code: null,
    });
    expect(rulesOf(h, evidence).sort()).toEqual(["receipt_lost", "receipt_not_indexed"]);
  });

  it("a tool call that lost the accepted it applied", () => {
    const { h } = history();
    Object.assign(assignment(h, 0), { accepted: null });
    expect(rulesOf(h).sort()).toEqual(["receipt_not_indexed", "state_receipt_mismatch"]);
  });

  it("receipts a later edge replaced stay accounted for by their tool call", () => {
    const { h } = history();
    // a-0 was reconciliation_required before its completed settled it; that receipt moved to `replaced`.
    const { seq, digest } = publish(h, {
      receipt_id: "a-0_unknown",
      assignment_id: "a-0",
      kind: "reconciliation_required",
      error: { code: "crash", message: "?" },
    });
    assignment(h, 0).replaced = [
      { receipt_id: "a-0_unknown", kind: "reconciliation_required", body_digest: digest, stream_seq: seq, at: T0 + 50, executor_id: "exec-1" },
    ];
    expect(rulesOf(h)).toEqual([]);
    assignment(h, 0).replaced![0]!.body_digest = "0".repeat(64);
    expect(rulesOf(h)).toEqual(["applied_receipt_mismatch"]);
    delete assignment(h, 0).replaced;
    expect(rulesOf(h)).toEqual(["receipt_not_indexed"]);
  });

  it("a duplicate side effect for one operation key", () => {
    const { h, evidence } = history();
    evidence.sideEffects.push({ ...evidence.sideEffects[1]! });
    expect(rulesOf(h, evidence)).toEqual(["duplicate_side_effect"]);
  });

  it("a side effect without a confirmed claim, and a completed write without one", () => {
    const { h, evidence } = history();
    evidence.sideEffects[0]!.generation = 1; // an effect by a claim the gateway never confirmed
    evidence.sideEffects.splice(2, 1);
    expect(rulesOf(h, evidence).sort()).toEqual(["missing_side_effect", "unconfirmed_side_effect"]);
  });

  it("a changed projection: against the snapshot, and a create-only bucket with a rewritten entry", () => {
    const { h } = history();
    const snapshot = snapshotOf(h);
    const p = h.projections[0]!;
    p.context_preview = buildContextPreview({ i: 0, rows: "y" }, { maxResultContextBytes: 1024 });
    h.createOnly[0] = { bucket: "tg_projections", firstSeq: 1, lastSeq: 4, messages: 3 };
    expect(snapshot["a-0"]).not.toBe(projectionDigest(p.context_preview));
    expect(rulesOf(h, undefined, snapshot).sort()).toEqual(["create_only_rewritten", "projection_changed"]);
  });

  it("a projection stored twice: in the projections bucket and in the record that completed the call", () => {
    const { h } = history();
    const p = h.projections[0]!;
    h.projections.push({ ...p, context_preview: buildContextPreview({ i: 0, rows: "other" }, { maxResultContextBytes: 1024 }) });
    expect(rulesOf(h)).toEqual(["projection_changed"]);
  });

  it("a projection over budget, or of another receipt", () => {
    const { h } = history();
    h.projections[0]!.context_preview = { ...h.projections[0]!.context_preview, result: { rows: "z".repeat(1_500) }, retained_bytes: 1_011 };
    h.projections[1]!.receipt_id = "a-1_accepted";
    expect(rulesOf(h).sort()).toEqual(["projection_mismatch", "projection_over_budget"]);
  });

  it("a revived run: active again after its end, a call added after it, a receipt recorded after it", () => {
    const { h } = history();
    const run = h.runs[0]!;
    run.value = { ...run.value, state: "cancelled", ended_at: T0 + 150 };
    run.storedAt = T0 + 150;
    // a-0 finished before the end; a-1 and a-2 were created after it, their receipts stored after it and recorded.
    expect(rulesOf(h).sort()).toEqual(["call_after_run_end", "receipt_applied_after_run_end"]);
    run.value = { ...run.value, state: "active" };
    expect(rulesOf(h)).toContain("run_end_inconsistent");
  });

  it("a run's end in three steps: recorded while active, its calls settled, then terminal", () => {
    const { h } = history(2);
    const run = h.runs[0]!;
    // Being ended: still active, no ended_at; every call's receipts are ordered by their own compare-and-set.
    run.value = { ...run.value, ending: { event: "cancel", at: T0 + 102 } };
    expect(rulesOf(h)).toEqual([]);
    // Terminal once a-1's final receipt (stored at T0 + 103, while the run was ending) was applied: not late.
    const { ending: _ending, ...rest } = run.value;
    run.value = { ...rest, state: "cancelled", ended_at: T0 + 104 };
    run.storedAt = T0 + 104;
    expect(rulesOf(h)).toEqual([]);
    // Terminal before that receipt was stored, and it was applied all the same: the end was revived.
    run.storedAt = T0 + 102;
    expect(rulesOf(h)).toEqual(["receipt_applied_after_run_end"]);
    // A terminal run still marked ending: its last write did not finish the end.
    run.storedAt = T0 + 104;
    run.value = { ...run.value, ending: { event: "cancel", at: T0 + 102 } };
    expect(rulesOf(h)).toEqual(["run_end_inconsistent"]);
  });

  it("late receipts after the end are fine when they were not recorded", () => {
    const { h } = history(1);
    const run = h.runs[0]!;
    run.value = { ...run.value, state: "completed", ended_at: T0 + 2 };
    run.storedAt = T0 + 2;
    indexAs(h, "a-0_completed", { status: "late_ignored", code: "run_terminated" });
    Object.assign(assignment(h, 0), { state: "abandoned", final: null, outcome: null });
    h.projections = [];
    expect(rulesOf(h)).toEqual([]);
  });

  it("a lost receipt: answered to the executor but absent from the stream or the index", () => {
    const { h, evidence } = history();
    h.index = h.index.filter((e) => e.receipt_id !== "a-2_p1");
    h.progress = h.progress.filter((p) => p.receipt_id !== "a-2_p1");
    evidence.outbox.push({
      executor_id: "exec-1",
      receipt_id: "a-9_completed",
      assignment_id: "a-9",
      kind: "completed",
      answer_status: "recorded",
      answer_code: null,
    });
    expect(rulesOf(h, evidence).sort()).toEqual(["receipt_lost", "receipt_not_indexed"]);
  });

  it("an unanswered outbox entry is lost only when no gateway processed it", () => {
    const { h, evidence } = history();
    // The answer was in flight when the executor stopped, but the receipt is stored and indexed.
    evidence.outbox.push({ executor_id: "exec-1", receipt_id: "a-2_p1", assignment_id: "a-2", kind: "progress", answer_status: null, answer_code: null });
    expect(rulesOf(h, evidence)).toEqual([]);
    // Never reached any gateway.
    evidence.outbox.push({
      executor_id: "exec-1",
      receipt_id: "a-9_completed",
      assignment_id: "a-9",
      kind: "completed",
      answer_status: null,
      answer_code: null,
    });
    expect(rulesOf(h, evidence)).toEqual(["receipt_lost"]);
  });

  it("passes progress indexed by its own entry (store layout 3), and holds that entry to the stream's copy", () => {
    const { h } = history();
    // The progress receipts' index entries move into their progress entries.
    const moved = h.index.filter((e) => e.kind === "progress");
    h.index = h.index.filter((e) => e.kind !== "progress");
    h.progress = h.progress.map((p) => {
      const e = moved.find((m) => m.receipt_id === p.receipt_id)!;
      return { ...p, indexed: { executor_id: e.executor_id, body_digest: e.body_digest, stream_seq: e.stream_seq } };
    });
    const report = checkHistory(h);
    expect(report.violations).toEqual([]);
    expect(report.counts).toMatchObject({ receipt_index: {}, indexed_by_progress: 3 });

    h.progress[0]!.indexed!.body_digest = "0".repeat(64);
    h.progress[1]!.indexed!.stream_seq = 1;
    const mismatches = checkHistory(h).violations;
    expect(mismatches.map((v) => [v.rule, v.receipt_id])).toEqual([
      ["index_mismatch", "a-0_p1"],
      ["index_mismatch", "a-1_p1"],
    ]);
    // Without either index, a progress receipt in the stream was never processed.
    h.progress = [];
    expect(checkHistory(h).violations.map((v) => [v.rule, v.receipt_id])).toEqual(["a-0_p1", "a-1_p1", "a-2_p1"].map((id) => ["receipt_not_indexed", id]));
  });

  it("passes progress carried by its assignment's record (store layout 4), holds it to the stream's copy and to one receipt per seq", () => {
    const { h } = history();
    // The progress receipts move from the bucket and the index into their records' logs.
    const moved = h.index.filter((e) => e.kind === "progress");
    h.index = h.index.filter((e) => e.kind !== "progress");
    for (const { value: a } of h.assignments) {
      const log = h.progress
        .filter((p) => p.assignment_id === a.assignment_id)
        .map((p) => {
          const e = moved.find((m) => m.receipt_id === p.receipt_id)!;
          return { ...p, indexed: { executor_id: e.executor_id, body_digest: e.body_digest, stream_seq: e.stream_seq } };
        });
      if (log.length > 0) a.progress_log = log;
    }
    const bucket = h.progress;
    h.progress = [];
    const report = checkHistory(h);
    expect(report.violations).toEqual([]);
    expect(report.counts).toMatchObject({ receipt_index: {}, indexed_by_progress: 0, progress_in_records: 3, progress: 3 });

    // The same seq of a call in the bucket too, for another receipt.
    h.progress = [{ ...bucket[0]!, receipt_id: "a-0_p1_other" }];
    expect(checkHistory(h).violations.map((v) => [v.rule, v.assignment_id])).toContainEqual(["progress_mismatch", "a-0"]);
    h.progress = [];
    const carrying = h.assignments.find(({ value }) => value.progress_log)!.value;
    carrying.progress_log![0]!.indexed!.stream_seq = 1;
    expect(checkHistory(h).violations.map((v) => v.rule)).toContain("index_mismatch");
  });

  it("a chain (a read's first receipts in one message) applied whole passes; one taken in part is a split", () => {
    const { h, evidence } = history(1);
    // The call's three receipts in one message, at sequence 1, each applied or indexed from it.
    for (const r of h.receipts) r.seq = 1;
    const a = assignment(h, 0);
    a.accepted!.stream_seq = 1;
    a.final!.stream_seq = 1;
    for (const e of h.index) e.stream_seq = 1;
    expect(rulesOf(h, evidence)).toEqual([]);
    // Its final receipt applied from a message of its own (sent alone), its report from the chain.
    const completed = h.receipts.find((r) => r.receipt?.kind === "completed")!.receipt!;
    a.final!.stream_seq = publish(h, completed).seq;
    expect(rulesOf(h, evidence)).toEqual(["chain_split"]);
  });

  it("a receipt applied twice: a second final recorded, progress stored twice", () => {
    const { h } = history();
    const dup = h.receipts.find((r) => r.receipt?.receipt_id === "a-0_completed")!;
    const second = { ...dup.receipt!, receipt_id: "a-0_completed_again" } as Receipt;
    h.receipts.push({ seq: 100, storedAt: dup.storedAt, receipt: second });
    h.index.push({
      receipt_id: second.receipt_id,
      assignment_id: "a-0",
      executor_id: "exec-1",
      kind: "completed",
      body_digest: receiptBodyDigest(second),
      status: "recorded",
      stream_seq: 100,
      at: dup.storedAt,
    });
    h.progress.push({ ...h.progress[1]!, seq: 2 });
    expect(rulesOf(h).sort()).toEqual(["progress_mismatch", "receipt_applied_twice"]);
  });

  it("a state that its receipts do not support, a body that differs from the stream, an unsettled call", () => {
    const { h } = history();
    Object.assign(assignment(h, 0), { state: "failed" });
    assignment(h, 1).accepted!.body_digest = "0".repeat(64);
    Object.assign(assignment(h, 2), { state: "running", final: null, outcome: null });
    h.projections.pop();
    // a-2: running, yet its completed (valid token) is in the stream, neither indexed nor held by it.
    expect(rulesOf(h).sort()).toEqual(["applied_receipt_mismatch", "call_not_settled", "projection_mismatch", "receipt_not_indexed", "state_receipt_mismatch"]);
  });

  it("a claim by an executor the registry never granted the binding", () => {
    const { h } = history();
    const a1 = assignment(h, 1);
    // Granted at some point, then taken away: the claim may well have come first.
    h.registry!.revisions.push(
      { executor_id: "exec-1", storedAt: T0 + 1_000, value: registered("exec-1", []) },
      { executor_id: "exec-1", storedAt: T0 + 2_000, value: null },
    );
    expect(rulesOf(h)).toEqual([]);
    // Never registered, or registered in another scope or for another binding.
    for (const [executorId, value] of [
      ["ghost", null],
      ["foreign", registered("foreign", ["b"], "other")],
      ["reader", registered("reader", ["b-read"])],
    ] as const) {
      a1.past_claims = [{ ...a1.claim!, executor_id: executorId }];
      if (value) h.registry!.revisions.push({ executor_id: executorId, storedAt: T0, value });
      const found = checkHistory(h).violations;
      expect(found).toEqual([expect.objectContaining({ rule: "claim_not_granted", assignment_id: a1.assignment_id })]);
    }
    // A key with as many revisions as the bucket keeps may have lost the one that granted it: not judged.
    h.registry!.keep = 1;
    expect(rulesOf(h)).toEqual([]);
    // A history without the registry (it could not be read) skips the rule.
    delete h.registry;
    expect(rulesOf(h)).toEqual([]);
  });
  it("a background task: its submission, its settlement as a task result of the run, once each", () => {
    const { h } = history();
    // a-0 submitted a task (the submission, replaced by its completed) and its run lists the completion as a task result.
    const { seq, digest } = publish(h, { receipt_id: "a-0_submission", assignment_id: "a-0", kind: "submission", task_ref: "job-0", status: "queued" });
    const a0 = assignment(h, 0);
    a0.replaced = [{ receipt_id: "a-0_submission", kind: "submission", body_digest: digest, stream_seq: seq, at: T0 + 50, executor_id: "exec-1" }];
    a0.task = { task_ref: "job-0", status: "queued", submitted_at: T0 + 50, deadline_at: T0 + 86_400_050 };
    const run = h.runs[0]!.value;
    run.task_results = [{ assignment_id: "a-0", receipt_id: "a-0_completed", outcome: { kind: "completed" }, after_tool_calls: 2, at: T0 + 60 }];
    expect(rulesOf(h)).toEqual([]);

    run.task_results = [];
    expect(rulesOf(h)).toEqual(["task_result_missing"]);
    run.task_results = [
      { assignment_id: "a-0", receipt_id: "a-0_completed", outcome: { kind: "completed" }, after_tool_calls: 2, at: T0 + 60 },
      { assignment_id: "a-0", receipt_id: "a-0_completed", outcome: { kind: "completed" }, after_tool_calls: 3, at: T0 + 70 },
    ];
    expect(rulesOf(h)).toEqual(["task_result_mismatch"]);
    // A result the task never had, or for a call that submitted nothing.
    run.task_results = [
      { assignment_id: "a-0", receipt_id: "a-0_completed", outcome: { kind: "completed" }, after_tool_calls: 2, at: T0 + 60 },
      { assignment_id: "a-1", receipt_id: "a-1_completed", outcome: { kind: "completed" }, after_tool_calls: 2, at: T0 + 60 },
    ];
    expect(rulesOf(h)).toEqual(["task_result_mismatch"]);
    run.task_results.pop();

    a0.task = { ...a0.task, task_ref: "job-other" };
    expect(rulesOf(h)).toEqual(["task_mismatch"]);
    delete a0.task;
    expect(rulesOf(h)).toEqual(["task_mismatch", "task_result_mismatch"]);
  });

  it("a task still submitted is not settled; one past its deadline is reconciliation_required without a final receipt of its own", () => {
    const { h } = history(1);
    const { seq, digest } = publish(h, { receipt_id: "a-0_submission", assignment_id: "a-0", kind: "submission", task_ref: "job-0", status: "queued" });
    const submission = { receipt_id: "a-0_submission", kind: "submission" as const, body_digest: digest, stream_seq: seq, at: T0 + 50 };
    // The completed never came: drop it from the stream and the projections.
    h.receipts = h.receipts.filter((r) => r.receipt?.kind !== "completed");
    h.projections = [];
    h.createOnly = [];
    Object.assign(assignment(h, 0), {
      state: "submitted",
      final: submission,
      outcome: null,
      task: { task_ref: "job-0", status: "queued", submitted_at: T0 + 50, deadline_at: T0 + 1_050 },
    });
    expect(rulesOf(h)).toEqual(["call_not_settled"]);
    Object.assign(assignment(h, 0), {
      state: "reconciliation_required",
      outcome: { kind: "reconciliation_required", error: { code: "task_deadline_passed", message: "?" } },
    });
    expect(rulesOf(h)).toEqual(["task_result_missing"]);
    h.runs[0]!.value.task_results = [{ assignment_id: "a-0", receipt_id: null, outcome: assignment(h, 0).outcome!, after_tool_calls: 1, at: T0 + 1_100 }];
    expect(rulesOf(h)).toEqual([]);
  });
});
