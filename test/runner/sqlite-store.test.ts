import { closeSync, fstatSync, mkdtempSync, openSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { transition } from "../../src/runner/phases.js";
import { buildReceipt } from "../../src/runner/receipts.js";
import { receiptId } from "../../src/wire/receipt-ids.js";
import { SqliteRunnerStore } from "../../src/runner/sqlite-store.js";
import { PhaseConflictError, type LocalAssignment } from "../../src/runner/store.js";
import type { Grant } from "../../src/wire/messages.js";
import { sampleGrant } from "./helpers/grants.js";

/**
 * The store's fsyncs on the thread pool (fdatasync), counted and, while `held` is set, parked until
 * the test lets them run; and those on the event loop (fdatasyncSync), counted and made to take at
 * least `inlineMs` (a slow disk).
 */
const fsyncs = vi.hoisted(() => ({ count: 0, held: undefined as Array<() => void> | undefined, inline: 0, inlineMs: 0 }));
vi.mock("node:fs", async (importOriginal) => {
  const fs = await importOriginal<typeof import("node:fs")>();
  const fdatasync = (fd: number, done: (err: NodeJS.ErrnoException | null) => void) => {
    fsyncs.count++;
    const run = () => fs.fdatasync(fd, done);
    if (fsyncs.held) fsyncs.held.push(run);
    else run();
  };
  const fdatasyncSync = (fd: number) => {
    fsyncs.inline++;
    const until = performance.now() + fsyncs.inlineMs;
    fs.fdatasyncSync(fd);
    while (performance.now() < until);
  };
  return { ...fs, fdatasync, fdatasyncSync };
});

/** Lets the event loop go round a few times (a write waits for setImmediate, then for its fsync). */
const turns = async (n = 5) => {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
};

describe("SqliteRunnerStore (real SQLite file)", () => {
  let dir: string;
  let path: string;
  let store: SqliteRunnerStore;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), "toolgate-store-"));
    path = join(dir, "runner.db");
    // Every fsync on the thread pool, where a test can hold it (one on the event loop cannot be held).
    store = new SqliteRunnerStore(path, { inlineFsyncBelowMs: 0 });
    await store.open("exec-1");
  });
  afterEach(async () => {
    fsyncs.held?.splice(0).forEach((run) => run());
    fsyncs.held = undefined;
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const local = (grant = sampleGrant()): LocalAssignment => ({
    assignmentId: grant.assignment_id,
    generation: grant.generation,
    grant,
    phase: "accepting",
    createdAt: 1,
    updatedAt: 1,
  });

  it("saves a claim with its accepted receipt atomically and reads both back after reopening", async () => {
    const grant = sampleGrant();
    await store.createAssignment(local(grant), [
      buildReceipt(grant, { kind: "accepted", operation_key: grant.operation_key, argument_digest: grant.argument_digest }, 10),
    ]);
    await store.close();
    store = new SqliteRunnerStore(path);
    await store.open("exec-1");
    const [open] = await store.listOpen();
    expect(open).toMatchObject({ assignmentId: grant.assignment_id, phase: "accepting", grant });
    const receipts = await store.listReceipts(open!);
    expect(receipts.map((r) => [r.receiptId, r.kind, r.answer])).toEqual([[receiptId(grant, { kind: "accepted" }), "accepted", undefined]]);
    expect(receipts[0]!.body).toEqual({
      receipt_id: receiptId(grant, { kind: "accepted" }),
      assignment_id: grant.assignment_id,
      executor_id: "exec-1",
      kind: "accepted",
      operation_key: grant.operation_key,
      argument_digest: grant.argument_digest,
    });
  });

  it("opens a store made before the submitted phase existed: its table is rebuilt, rows and receipts kept, a task can be submitted", async () => {
    const grant = sampleGrant();
    await store.createAssignment({ ...local(grant), phase: "accepting" }, [
      buildReceipt(grant, { kind: "accepted", operation_key: grant.operation_key, argument_digest: grant.argument_digest }, 10),
    ]);
    await store.close();
    // The assignments table as the previous release made it: its CHECK lists no `submitted`.
    const Database = (await import("better-sqlite3")).default;
    const db = new Database(path);
    db.pragma("foreign_keys = OFF");
    db.pragma("legacy_alter_table = ON"); // the receipts' foreign key keeps naming `assignments`
    const old = (db.prepare("SELECT sql FROM sqlite_master WHERE name = 'assignments'").pluck().get() as string).replace("'submitted', ", "");
    db.exec(`ALTER TABLE assignments RENAME TO assignments_now; ${old}; INSERT INTO assignments SELECT * FROM assignments_now; DROP TABLE assignments_now;`);
    expect(() => db.prepare("UPDATE assignments SET phase = 'submitted'").run()).toThrow(/CHECK constraint/);
    db.close();

    store = new SqliteRunnerStore(path);
    await store.open("exec-1");
    const [open] = await store.listOpen();
    expect(open).toMatchObject({ assignmentId: grant.assignment_id, phase: "accepting", grant });
    expect(await store.listReceipts(open!)).toHaveLength(1);
    await store.setPhase(open!, transition("accepting", "confirm"));
    await store.appendReceipt(buildReceipt(grant, { kind: "submission", task_ref: "job-1", status: "queued" }, 11), transition("confirmed", "submit"));
    expect((await store.getAssignment(grant.assignment_id))!.phase).toBe("submitted");
  });

  it("records answers and phase changes together, compare-and-set", async () => {
    const grant = sampleGrant();
    const accepted = buildReceipt(grant, { kind: "accepted", operation_key: grant.operation_key, argument_digest: grant.argument_digest }, 10);
    await store.createAssignment(local(grant), [accepted]);
    await store.recordAnswer(accepted.receiptId, { status: "recorded", answeredAt: 11 }, transition("accepting", "confirm"));
    await expect(store.setPhase(local(grant), transition("accepting", "refuse"))).rejects.toBeInstanceOf(PhaseConflictError);
    await store.setPhase(local(grant), transition("confirmed", "start"));
    const progress = buildReceipt(grant, { kind: "progress", seq: 1, progress: { done: 1 } }, 12);
    await store.appendReceipt(progress);
    const final = buildReceipt(grant, { kind: "completed", result: { id: "t-1", 名前: "タスク" } }, 13);
    // A failed phase change takes its receipt down with it.
    await expect(store.appendReceipt(final, transition("confirmed", "report"))).rejects.toBeInstanceOf(PhaseConflictError);
    expect((await store.listReceipts(local(grant))).map((r) => r.kind)).toEqual(["accepted", "progress"]);
    await store.appendReceipt(final, transition("running", "report"));
    await store.recordAnswer(progress.receiptId, { status: "recorded", answeredAt: 13 });
    await store.recordAnswer(final.receiptId, { status: "duplicate", code: "x", reason: "already", answeredAt: 14 }, transition("reporting", "settle"));
    const receipts = await store.listReceipts(local(grant));
    expect(receipts.map((r) => r.kind)).toEqual(["accepted", "progress", "completed"]);
    expect(receipts[2]!.answer).toEqual({ status: "duplicate", code: "x", reason: "already", answeredAt: 14 });
    expect(receipts[2]!.body.result).toEqual({ id: "t-1", 名前: "タスク" });
    expect(await store.listOpen()).toEqual([]);
    expect((await store.getAssignment(grant.assignment_id))?.phase).toBe("settled");
  });

  it("lists a claim that is over while a receipt of it is unanswered: a read refused with its outcome on the way", async () => {
    const grant = sampleGrant({ tool_kind: "read" });
    const accepted = buildReceipt(grant, { kind: "accepted", operation_key: grant.operation_key, argument_digest: grant.argument_digest }, 10);
    const completed = buildReceipt(grant, { kind: "completed", result: { ok: true } }, 11);
    await store.createAssignment(local(grant), [accepted]);
    await store.appendReceipt(completed, transition("accepting", "report"));
    await store.recordAnswer(accepted.receiptId, { status: "rejected", code: "lease_expired", answeredAt: 12 }, transition("reporting", "refuse"));
    expect(await store.listOpen()).toEqual([expect.objectContaining({ assignmentId: grant.assignment_id, phase: "refused" })]);
    await store.recordAnswer(completed.receiptId, { status: "rejected", code: "illegal_transition", answeredAt: 13 });
    expect(await store.listOpen()).toEqual([]);
  });

  it("leaves an answer unrecorded when its phase change conflicts, written alone or in a batch", async () => {
    const grants = ["asg-alone", "asg-batch"].map((id) => sampleGrant({ assignment_id: id }));
    const accepted = grants.map((g) => buildReceipt(g, { kind: "accepted", operation_key: g.operation_key, argument_digest: g.argument_digest }, 1));
    await Promise.all(grants.map((g, i) => store.createAssignment(local(g), [accepted[i]!])));
    const wrong = transition("reporting", "settle"); // the claims are accepting
    await expect(store.recordAnswer(accepted[0]!.receiptId, { status: "recorded", answeredAt: 2 }, wrong)).rejects.toBeInstanceOf(PhaseConflictError);
    const batch = await Promise.allSettled([
      store.recordAnswer(accepted[1]!.receiptId, { status: "recorded", answeredAt: 2 }, wrong),
      store.setPhase(local(grants[0]), transition("accepting", "refuse")),
    ]);
    expect(batch.map((o) => o.status)).toEqual(["rejected", "fulfilled"]);
    for (const g of grants) expect((await store.listReceipts(local(g)))[0]!.answer).toBeUndefined();
    await expect(store.recordAnswer("no-such-receipt", { status: "recorded", answeredAt: 3 })).rejects.toThrow("no saved receipt no-such-receipt");
  });

  it("keeps claims of several generations apart and returns the latest", async () => {
    const first = sampleGrant({ generation: 0 });
    const second = sampleGrant({ generation: 1, claim_token: "t".repeat(40) });
    await store.createAssignment(local(first), [
      buildReceipt(first, { kind: "accepted", operation_key: first.operation_key, argument_digest: first.argument_digest }, 1),
    ]);
    await store.recordAnswer(
      receiptId(first, { kind: "accepted" }),
      { status: "rejected", code: "lease_expired", answeredAt: 2 },
      transition("accepting", "refuse"),
    );
    await store.createAssignment(local(second), [
      buildReceipt(second, { kind: "accepted", operation_key: second.operation_key, argument_digest: second.argument_digest }, 3),
    ]);
    expect((await store.getAssignment(first.assignment_id))?.generation).toBe(1);
    expect((await store.listOpen()).map((a) => a.generation)).toEqual([1]);
  });

  it("refuses a store that belongs to another executor, and a second process on the same file", async () => {
    await store.close();
    const other = new SqliteRunnerStore(path);
    await expect(other.open("exec-2")).rejects.toThrow(/belongs to executor 'exec-1'/);
    await other.close();
    store = new SqliteRunnerStore(path);
    await store.open("exec-1");
    expect(() => new SqliteRunnerStore(path)).toThrow(/locked/);
  });

  it("commits writes queued together as one batch in which a failing write fails alone", async () => {
    const grants = ["asg-a", "asg-b", "asg-c"].map((id) => sampleGrant({ assignment_id: id }));
    await Promise.all(
      grants.map((g) =>
        store.createAssignment(local(g), [buildReceipt(g, { kind: "accepted", operation_key: g.operation_key, argument_digest: g.argument_digest }, 1)]),
      ),
    );
    const writes = [
      store.setPhase(local(grants[0]), transition("accepting", "refuse")),
      store.setPhase(local(grants[1]), transition("confirmed", "start")), // not confirmed: a phase conflict
      store.appendReceipt(buildReceipt(grants[2]!, { kind: "failed", error: { code: "x", message: "y" } }, 2), transition("accepting", "refuse")),
    ];
    const outcomes = await Promise.allSettled(writes);
    expect(outcomes.map((o) => o.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    expect((outcomes[1] as PromiseRejectedResult).reason).toBeInstanceOf(PhaseConflictError);
    // Durable once resolved: a reopened store has the batch, minus the write that failed.
    await store.close();
    store = new SqliteRunnerStore(path);
    await store.open("exec-1");
    expect(await Promise.all(grants.map(async (g) => (await store.getAssignment(g.assignment_id))?.phase))).toEqual(["refused", "accepting", "refused"]);
    expect((await store.listReceipts(local(grants[2]))).map((r) => r.kind)).toEqual(["accepted", "failed"]);
  });

  it("rolls back what a failing write of a batch did before it threw, and runs the batch's other writes once", async () => {
    const [settled, kept, broken] = ["asg-settled", "asg-kept", "asg-broken"].map((id) => sampleGrant({ assignment_id: id }));
    const accepted = (g: Grant, at: number) => buildReceipt(g, { kind: "accepted", operation_key: g.operation_key, argument_digest: g.argument_digest }, at);
    await store.createAssignment({ ...local(settled), phase: "settled", createdAt: 100, updatedAt: 100 }, [accepted(settled!, 100)]);
    const duplicate = accepted(broken!, 1);
    const outcomes = await Promise.allSettled([
      store.pruneSettled(500, 10),
      store.createAssignment(local(kept), [accepted(kept!, 1)]),
      // Its assignment row is inserted, then its second receipt breaks the receipt id's uniqueness.
      store.createAssignment(local(broken), [duplicate, duplicate]),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(["fulfilled", "fulfilled", "rejected"]);
    expect((outcomes[0] as PromiseFulfilledResult<number>).value).toBe(1); // counted once, not once per run of the batch
    expect((outcomes[2] as PromiseRejectedResult).reason).toMatchObject({ message: expect.stringMatching(/UNIQUE/) });
    await store.close();
    store = new SqliteRunnerStore(path);
    await store.open("exec-1");
    expect(await store.getAssignment("asg-settled")).toBeUndefined();
    expect((await store.getAssignment("asg-kept"))?.phase).toBe("accepting");
    expect(await store.getAssignment("asg-broken")).toBeUndefined();
    expect(await store.listReceipts(local(broken))).toEqual([]);
  });

  it("refuses a receipt id saved twice", async () => {
    const grant = sampleGrant();
    const accepted = buildReceipt(grant, { kind: "accepted", operation_key: grant.operation_key, argument_digest: grant.argument_digest }, 10);
    await store.createAssignment(local(grant), [accepted]);
    await expect(store.appendReceipt(accepted)).rejects.toThrow(/UNIQUE/);
  });

  it("resolves a write only once an fsync begun after its commit is done; commits made meanwhile share the next one", async () => {
    const [a, b, c] = [sampleGrant({ assignment_id: "asg-a" }), sampleGrant({ assignment_id: "asg-b" }), sampleGrant({ assignment_id: "asg-c" })];
    const accepted = (g: Grant) => [buildReceipt(g, { kind: "accepted", operation_key: g.operation_key, argument_digest: g.argument_digest }, 1)];
    fsyncs.held = [];
    fsyncs.count = 0;
    const resolved: string[] = [];
    const first = store.createAssignment(local(a), accepted(a)).then(() => resolved.push("a"));
    await turns();
    // Committed (a read sees it) but not yet on disk: not resolved.
    expect((await store.getAssignment("asg-a"))?.phase).toBe("accepting");
    expect([resolved, fsyncs.count]).toEqual([[], 1]);
    const later = [
      store.createAssignment(local(b), accepted(b)).then(() => resolved.push("b")),
      store.createAssignment(local(c), accepted(c)).then(() => resolved.push("c")),
    ];
    await turns();
    // Committed while the first fsync runs: that one may not cover them, so they wait for another.
    expect([resolved, fsyncs.count]).toEqual([[], 1]);
    fsyncs.held.shift()!();
    await first;
    await turns();
    expect([resolved, fsyncs.count]).toEqual([["a"], 2]);
    fsyncs.held.shift()!();
    await Promise.all(later);
    expect([resolved.sort(), fsyncs.count]).toEqual([["a", "b", "c"], 2]);
  });

  it("syncs a lone durable write on the event loop after a fast fsync; one after a slow fsync, or shared by several writes, on the thread pool", async () => {
    // 200 ms stands for "fast" here, so that a loaded machine's real fsync never counts as slow.
    const inline = new SqliteRunnerStore(join(dir, "inline.db"), { inlineFsyncBelowMs: 200 });
    await inline.open("exec-1");
    let n = 0;
    const durable = () => inline.createAssignment(local(sampleGrant({ assignment_id: `asg-inline-${++n}` })), []); // a write's claim
    const where = () => [fsyncs.count, fsyncs.inline];
    try {
      fsyncs.count = 0;
      fsyncs.inline = 0;
      await durable();
      expect(where()).toEqual([1, 0]); // nothing measured yet: the thread pool
      await durable();
      expect(where()).toEqual([1, 1]);
      fsyncs.inlineMs = 250; // the disk turns slow: this fsync is measured so
      await durable();
      expect(where()).toEqual([1, 2]);
      fsyncs.inlineMs = 0;
      await durable();
      expect(where()).toEqual([2, 2]); // after a slow one: the thread pool
      await Promise.all([durable(), durable()]);
      expect(where()).toEqual([3, 2]); // two writes share one: the thread pool
      await durable();
      expect(where()).toEqual([3, 3]);
      expect((await inline.getAssignment(`asg-inline-${n}`))?.phase).toBe("accepting");
    } finally {
      fsyncs.inlineMs = 0;
      await inline.close();
    }
  });

  it("prunes claims final before the cutoff with their receipts, oldest first, at most the limit; keeps open and younger ones", async () => {
    const claim = async (id: string, phase: LocalAssignment["phase"], at: number) => {
      const g = sampleGrant({ assignment_id: id });
      await store.createAssignment({ ...local(g), phase, createdAt: at, updatedAt: at }, [buildReceipt(g, { kind: "completed", result: { id } }, at)]);
    };
    await claim("old-settled-1", "settled", 100);
    await claim("old-open", "awaiting_reconciliation", 110);
    await claim("old-refused", "refused", 120);
    await claim("old-settled-2", "settled", 130);
    await claim("young-settled", "settled", 1_000);
    expect(await store.pruneSettled(500, 2)).toBe(2);
    expect(await store.getAssignment("old-settled-1")).toBeUndefined();
    expect(await store.getAssignment("old-refused")).toBeUndefined();
    expect((await store.getAssignment("old-settled-2"))?.phase).toBe("settled");
    expect(await store.pruneSettled(500, 2)).toBe(1);
    expect(await store.pruneSettled(500, 2)).toBe(0);
    expect(await store.getAssignment("old-settled-2")).toBeUndefined();
    expect(await store.listReceipts({ assignmentId: "old-settled-2", generation: 0 })).toEqual([]);
    expect((await store.getAssignment("old-open"))?.phase).toBe("awaiting_reconciliation");
    expect((await store.getAssignment("young-settled"))?.phase).toBe("settled");
    expect(await store.listReceipts({ assignmentId: "young-settled", generation: 0 })).toHaveLength(1);
  });

  it("resolves a read's claim once committed, without waiting for an fsync; a write's claim, or a read refused, waits for one", async () => {
    const read = sampleGrant({ assignment_id: "asg-read", tool_kind: "read" });
    const accepted = (g: Grant) => [buildReceipt(g, { kind: "accepted", operation_key: g.operation_key, argument_digest: g.argument_digest }, 1)];
    fsyncs.held = [];
    fsyncs.count = 0;
    await store.createAssignment(local(read), accepted(read));
    expect((await store.getAssignment("asg-read"))?.phase).toBe("accepting");
    const resolved: string[] = [];
    const write = sampleGrant({ assignment_id: "asg-write" });
    const refusedRead = sampleGrant({ assignment_id: "asg-refused", tool_kind: "read" });
    const refusal = [buildReceipt(refusedRead, { kind: "refused", error: { code: "authorization_refused", message: "no" } }, 1)];
    const durable = [
      store.createAssignment(local(write), accepted(write)).then(() => resolved.push("write")),
      store.createAssignment({ ...local(refusedRead), phase: "reporting" }, refusal).then(() => resolved.push("refused")),
    ];
    await turns();
    expect(resolved).toEqual([]);
    fsyncs.held.splice(0).forEach((run) => run());
    await turns();
    fsyncs.held.splice(0).forEach((run) => run());
    await Promise.all(durable);
    expect(resolved.sort()).toEqual(["refused", "write"]);
  });

  it("resolves a claim's first progress report once committed, without an fsync; a later report waits for one, which covers both", async () => {
    const grant = sampleGrant({ tool_kind: "read" });
    await store.createAssignment(local(grant), [
      buildReceipt(grant, { kind: "accepted", operation_key: grant.operation_key, argument_digest: grant.argument_digest }, 1),
    ]);
    await store.recordAnswer(receiptId(grant, { kind: "accepted" }), { status: "recorded", answeredAt: 2 }, transition("accepting", "confirm"));
    await turns();
    fsyncs.held = [];
    fsyncs.count = 0;
    const resolved: number[] = [];
    void store.appendReceipt(buildReceipt(grant, { kind: "progress", seq: 1, progress: "first" }, 3)).then(() => resolved.push(1));
    await turns();
    expect(resolved).toEqual([1]); // its fsync is still held
    const second = store.appendReceipt(buildReceipt(grant, { kind: "progress", seq: 2, progress: "second" }, 4)).then(() => resolved.push(2));
    await turns();
    expect(resolved).toEqual([1]);
    fsyncs.held.splice(0).forEach((run) => run());
    await turns();
    fsyncs.held.splice(0).forEach((run) => run());
    await second;
    expect(resolved).toEqual([1, 2]);
    expect((await store.listReceipts(local(grant))).map((r) => r.body.seq)).toEqual([undefined, 1, 2]);
  });

  it("resolves a read's outcome saved ahead of its confirmation once committed, its fsync begun at once on the thread pool; a confirmed read's outcome waits for its fsync", async () => {
    // Inline fsyncs allowed (200 ms is "fast"): the outcome's fsync still goes to the pool, where it blocks nothing.
    const inline = new SqliteRunnerStore(join(dir, "read-ahead.db"), { inlineFsyncBelowMs: 200 });
    await inline.open("exec-1");
    const claimOf = async (id: string) => {
      const grant = sampleGrant({ assignment_id: id, tool_kind: "read" });
      await inline.createAssignment(local(grant), [
        buildReceipt(grant, { kind: "accepted", operation_key: grant.operation_key, argument_digest: grant.argument_digest }, 1),
      ]);
      return grant;
    };
    const outcome = (grant: Grant) => buildReceipt(grant, { kind: "completed", result: { rows: 1 } }, 2);
    try {
      await inline.createAssignment(local(sampleGrant({ assignment_id: "asg-first-sync" })), []); // a write's claim: measures the disk
      const ahead = await claimOf("asg-ahead");
      fsyncs.held = [];
      fsyncs.count = 0;
      fsyncs.inline = 0;
      await inline.appendReceipt(outcome(ahead), transition("accepting", "report"));
      expect([fsyncs.count, fsyncs.inline, fsyncs.held.length]).toEqual([1, 0, 1]); // begun, still running
      expect((await inline.getAssignment("asg-ahead"))?.phase).toBe("reporting");
      fsyncs.held.splice(0).forEach((run) => run());
      fsyncs.held = undefined;
      await turns();

      const confirmed = await claimOf("asg-confirmed");
      await inline.recordAnswer(receiptId(confirmed, { kind: "accepted" }), { status: "recorded", answeredAt: 2 }, transition("accepting", "confirm"));
      fsyncs.count = 0;
      fsyncs.inline = 0;
      await inline.appendReceipt(outcome(confirmed), transition("confirmed", "report"));
      expect([fsyncs.count, fsyncs.inline]).toEqual([0, 1]); // waited for, on the loop (a lone write after a fast fsync)
    } finally {
      fsyncs.held?.splice(0).forEach((run) => run());
      fsyncs.held = undefined;
      await inline.close();
    }
    const reopened = new SqliteRunnerStore(join(dir, "read-ahead.db"));
    await reopened.open("exec-1");
    try {
      expect((await reopened.listReceipts({ assignmentId: "asg-ahead", generation: 0 })).map((r) => r.kind)).toEqual(["accepted", "completed"]);
    } finally {
      await reopened.close();
    }
  });

  it("resolves an answer once committed, without an fsync; close fsyncs it, so a reopened store has it", async () => {
    const grant = sampleGrant();
    const accepted = buildReceipt(grant, { kind: "accepted", operation_key: grant.operation_key, argument_digest: grant.argument_digest }, 10);
    await store.createAssignment(local(grant), [accepted]);
    fsyncs.held = [];
    fsyncs.count = 0;
    await store.recordAnswer(accepted.receiptId, { status: "recorded", answeredAt: 11 }, transition("accepting", "confirm"));
    expect(fsyncs.count).toBe(0);
    expect((await store.getAssignment(grant.assignment_id))?.phase).toBe("confirmed");
    const closing = store.close();
    await turns();
    expect(fsyncs.count).toBe(1);
    fsyncs.held.shift()!();
    await closing;
    store = new SqliteRunnerStore(path);
    await store.open("exec-1");
    expect((await store.getAssignment(grant.assignment_id))?.phase).toBe("confirmed");
    expect((await store.listReceipts(local(grant)))[0]!.answer).toEqual({ status: "recorded", answeredAt: 11 });
  });

  it("keeps writing the same WAL file across checkpoints, so the fsync of that file covers every commit", async () => {
    const wal = `${path}-wal`;
    const fd = openSync(wal, "r");
    try {
      // 8 MB of receipts: past SQLite's automatic checkpoint (1,000 pages), after which the WAL is reused from its start.
      for (let i = 0; i < 80; i++) {
        const g = sampleGrant({ assignment_id: `asg-${i}` });
        await store.createAssignment(local(g), [buildReceipt(g, { kind: "completed", result: { blob: "x".repeat(100_000) } }, 1)]);
      }
      expect(fstatSync(fd).ino).toBe(statSync(wal).ino);
    } finally {
      closeSync(fd);
    }
  });
});
