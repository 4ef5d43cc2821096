import { closeSync, fdatasync, fdatasyncSync, fsyncSync, openSync } from "node:fs";
import { dirname, resolve as absolute } from "node:path";
import Database from "better-sqlite3";
import { parseExactJson, toJsonText } from "../budget/index.js";
import { Grant, ReceiptKind } from "../wire/messages.js";
import { FINAL_PHASES, PHASES, type Phase } from "./phases.js";
import { receiptBodyText } from "./receipts.js";
import {
  isFirstProgress,
  isReadAheadOutcome,
  isReadClaim,
  PhaseConflictError,
  type AssignmentKey,
  type LocalAssignment,
  type OutboxReceipt,
  type PhaseChange,
  type ReceiptBody,
  type RunnerStore,
  type StoredAnswer,
} from "./store.js";

const SCHEMA_VERSION = "1";

/** The local assignments table; `phase` is checked against this release's phases. */
function assignmentsTable(name: string): string {
  return `CREATE TABLE IF NOT EXISTS ${name} (
    assignment_id TEXT NOT NULL,
    generation INTEGER NOT NULL,
    phase TEXT NOT NULL CHECK (phase IN (${PHASES.map((p) => `'${p}'`).join(", ")})),
    operation_key TEXT NOT NULL,
    tool_name TEXT NOT NULL,
    grant_json TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (assignment_id, generation)
  ) STRICT;`;
}

const OPEN_ASSIGNMENTS_INDEX = `CREATE INDEX IF NOT EXISTS assignments_open ON assignments (created_at) WHERE phase NOT IN (${[...FINAL_PHASES].map((p) => `'${p}'`).join(", ")});`;

/**
 * An fsync of the WAL is made on the event loop instead of libuv's thread pool when one durable write
 * alone waits for it and the store's previous fsync took less than this many milliseconds. On a disk
 * that syncs in tens of microseconds, the pool's two thread wake-ups around the fsync cost several
 * times the fsync itself, and a lone write has nothing to share it with; a slow (or busy) disk sends
 * the next fsync back to the pool, so it blocks the loop at most once in a row.
 */
export const INLINE_FSYNC_BELOW_MS = 1;

/**
 * The default `RunnerStore`: one SQLite file (better-sqlite3, synchronous API).
 *
 * Pragmas, and why:
 * - `journal_mode=WAL`: a commit is one sequential append, readers never block the writer.
 * - `synchronous=NORMAL`, with the fsync done here instead (`syncWal`): a commit survives a process
 *   crash (SIGKILL) once written, but only an fsync of the WAL makes it survive power loss or an OS
 *   crash. Losing the `running` mark after the handler started would make a restart run a write
 *   handler twice, so a write resolves only after an fsync that began after its commit. SQLite's
 *   own `FULL` would do that fsync inside the commit, blocking the event loop (better-sqlite3 is
 *   synchronous) and with it every claim of the process; here it runs on libuv's thread pool while
 *   the loop goes on, and what is committed meanwhile shares the next one (a lone write on a fast
 *   disk is synced on the loop: `INLINE_FSYNC_BELOW_MS`).
 * - `locking_mode=EXCLUSIVE`: the file belongs to one process; a second runner opening it (a
 *   mis-deployed replica with the same executor id) fails instead of interleaving two outboxes.
 *   The OS releases the lock when the process dies, so a restart after SIGKILL opens it again.
 */
export class SqliteRunnerStore implements RunnerStore {
  private readonly db: Database.Database;
  /** Compiled once: preparing a statement costs more than running these small ones. */
  private readonly statements = new Map<string, Database.Statement>();
  /** One transaction for a batch, its writes bare or, once one of them threw, each in a savepoint (a write alone: its own transaction); built once, as each transaction() call wraps four functions. */
  private readonly commitBatch: (batch: readonly QueuedWrite[], failures: Map<QueuedWrite, unknown>) => void;
  private readonly queued: QueuedWrite[] = [];
  /** Committed, waiting for an fsync of the WAL to start. */
  private readonly unsynced: Waiter[] = [];
  private syncing = false;
  private walFd: number | undefined;
  /** An fsync failed: what was committed may not be on disk, and a retried fsync cannot tell. */
  private syncError: unknown;
  /** How long the previous fsync took, ms (the first goes to the thread pool). */
  private lastSyncMs = Infinity;
  private readonly inlineFsyncBelowMs: number;

  /** `inlineFsyncBelowMs`: see `INLINE_FSYNC_BELOW_MS`; 0 keeps every fsync on the thread pool. */
  constructor(
    readonly path: string,
    options: { inlineFsyncBelowMs?: number } = {},
  ) {
    this.inlineFsyncBelowMs = options.inlineFsyncBelowMs ?? INLINE_FSYNC_BELOW_MS;
    this.db = new Database(path, { timeout: 1_000 });
    this.db.pragma("locking_mode = EXCLUSIVE");
    if (this.db.pragma("journal_mode = WAL", { simple: true }) !== "wal")
      throw new Error(`store ${path}: SQLite refused WAL mode, which its durability relies on`);
    this.db.pragma("synchronous = NORMAL");
    this.db.pragma("foreign_keys = ON");
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT;
      ${assignmentsTable("assignments")}
      ${OPEN_ASSIGNMENTS_INDEX}
      CREATE TABLE IF NOT EXISTS receipts (
        position INTEGER PRIMARY KEY AUTOINCREMENT,
        receipt_id TEXT NOT NULL UNIQUE,
        assignment_id TEXT NOT NULL,
        generation INTEGER NOT NULL,
        kind TEXT NOT NULL,
        body_json TEXT NOT NULL,
        saved_at INTEGER NOT NULL,
        answer_status TEXT,
        answer_code TEXT,
        answer_reason TEXT,
        answered_at INTEGER,
        FOREIGN KEY (assignment_id, generation) REFERENCES assignments (assignment_id, generation)
      ) STRICT;
      CREATE INDEX IF NOT EXISTS receipts_of_claim ON receipts (assignment_id, generation, position);
      CREATE INDEX IF NOT EXISTS receipts_unanswered ON receipts (assignment_id, generation) WHERE answer_status IS NULL;
    `);
    this.allowEveryPhase();
    // One write: a transaction of its own; nested in a batch's transaction: a savepoint.
    const write = this.db.transaction((op: () => void) => op());
    const eachInSavepoint = (batch: readonly QueuedWrite[], failures: Map<QueuedWrite, unknown>) => {
      for (const w of batch) {
        try {
          write(w.op);
        } catch (err) {
          failures.set(w, err);
        }
      }
    };
    const batchTransaction = this.db.transaction(eachInSavepoint);
    const allInOne = this.db.transaction((batch: readonly QueuedWrite[]) => {
      for (const w of batch) w.op();
    });
    this.commitBatch = (batch, failures) => {
      // A write alone needs no savepoint around it (two statements fewer): its transaction rolls back alone.
      if (batch.length === 1) return eachInSavepoint(batch, failures);
      try {
        // A savepoint makes SQLite journal every page its write changes (in a temporary file once a
        // batch is large), and a write seldom throws: the batch is tried without them first.
        return allInOne(batch);
      } catch {
        // A write threw and the whole batch rolled back: again, each in a savepoint, so only the writes that throw fail.
        return batchTransaction(batch, failures);
      }
    };
  }

  /**
   * A store made by an earlier release checks `phase` against that release's list (SQLite cannot
   * change a CHECK in place): its assignments table is rebuilt with today's, rows kept as they are.
   */
  private allowEveryPhase(): void {
    const sql = this.db.prepare("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'assignments'").pluck().get() as string;
    if (PHASES.every((p) => sql.includes(`'${p}'`))) return;
    this.db.pragma("foreign_keys = OFF");
    try {
      this.db.transaction(() => {
        this.db.exec(`
          ${assignmentsTable("assignments_next")}
          INSERT INTO assignments_next SELECT assignment_id, generation, phase, operation_key, tool_name, grant_json, created_at, updated_at FROM assignments;
          DROP TABLE assignments;
          ALTER TABLE assignments_next RENAME TO assignments;
          ${OPEN_ASSIGNMENTS_INDEX}
        `);
      })();
    } finally {
      this.db.pragma("foreign_keys = ON");
    }
  }

  async open(executorId: string): Promise<void> {
    this.db.transaction(() => {
      const bound = this.sql("SELECT value FROM meta WHERE key = 'executor_id'").pluck().get() as string | undefined;
      if (bound !== undefined && bound !== executorId) {
        throw new Error(`store ${this.path} belongs to executor '${bound}', not '${executorId}': its outbox would be resent under the wrong identity`);
      }
      const version = this.sql("SELECT value FROM meta WHERE key = 'schema_version'").pluck().get() as string | undefined;
      if (version !== undefined && version !== SCHEMA_VERSION)
        throw new Error(`store ${this.path} has schema version ${version}, this runner reads ${SCHEMA_VERSION}`);
      const put = this.sql("INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)");
      put.run("executor_id", executorId);
      put.run("schema_version", SCHEMA_VERSION);
    })();
  }

  /** A read's claim resolves once committed (see `RunnerStore`): its `accepted` leaves while the fsync runs. */
  createAssignment(assignment: LocalAssignment, receipts: readonly OutboxReceipt[]): Promise<void> {
    return this.write(isReadClaim(assignment) ? "committed" : "synced", () => {
      this.sql(
        `INSERT INTO assignments (assignment_id, generation, phase, operation_key, tool_name, grant_json, created_at, updated_at)
         VALUES (@assignmentId, @generation, @phase, @operationKey, @toolName, @grantJson, @createdAt, @updatedAt)`,
      ).run({
        assignmentId: assignment.assignmentId,
        generation: assignment.generation,
        phase: assignment.phase,
        operationKey: assignment.grant.operation_key,
        toolName: assignment.grant.tool_name,
        grantJson: toJsonText(assignment.grant), // exact numbers: the argument digest must still match
        createdAt: assignment.createdAt,
        updatedAt: assignment.updatedAt,
      });
      for (const receipt of receipts) this.insertReceipt(receipt);
    });
  }

  /**
   * A claim's first progress report resolves once committed, and a read's outcome saved ahead of its
   * confirmation once committed with its fsync begun (see `RunnerStore`): both leave without waiting for one.
   */
  appendReceipt(receipt: OutboxReceipt, change?: PhaseChange): Promise<void> {
    const durability = isFirstProgress(receipt) ? "committed" : isReadAheadOutcome(change) ? "committed_syncing" : "synced";
    return this.write(durability, () => {
      if (change) this.changePhase(receipt, change);
      this.insertReceipt(receipt);
    });
  }

  /** Resolves once committed, without waiting for the fsync (see `RunnerStore.recordAnswer`). */
  recordAnswer(receiptId: string, answer: StoredAnswer, change?: PhaseChange): Promise<void> {
    return this.write("committed", () => {
      // One statement finds the claim and records the answer; a phase conflict after it rolls both back (the write's savepoint).
      const row = this.sql(
        "UPDATE receipts SET answer_status = ?, answer_code = ?, answer_reason = ?, answered_at = ? WHERE receipt_id = ? RETURNING assignment_id, generation",
      ).get(answer.status, answer.code ?? null, answer.reason ?? null, answer.answeredAt, receiptId) as
        { assignment_id: string; generation: number } | undefined;
      if (!row) throw new Error(`no saved receipt ${receiptId}`);
      if (change) this.changePhase({ assignmentId: row.assignment_id, generation: row.generation }, change);
    });
  }

  setPhase(key: AssignmentKey, change: PhaseChange): Promise<void> {
    return this.write("synced", () => this.changePhase(key, change));
  }

  async getAssignment(assignmentId: string): Promise<LocalAssignment | undefined> {
    const row = this.sql("SELECT * FROM assignments WHERE assignment_id = ? ORDER BY generation DESC LIMIT 1").get(assignmentId) as AssignmentRow | undefined;
    return row && toAssignment(row);
  }

  async listOpen(): Promise<LocalAssignment[]> {
    const final = [...FINAL_PHASES];
    const marks = final.map(() => "?").join(", ");
    // A final claim is listed only while some receipt of it is unanswered (the partial index holds just those).
    const rows = this.sql(
      `SELECT * FROM assignments WHERE phase NOT IN (${marks})
       UNION ALL
       SELECT a.* FROM assignments a JOIN (SELECT DISTINCT assignment_id, generation FROM receipts WHERE answer_status IS NULL) u
         USING (assignment_id, generation) WHERE a.phase IN (${marks})
       ORDER BY created_at, assignment_id`,
    ).all(...final, ...final) as AssignmentRow[];
    return rows.map(toAssignment);
  }

  async listReceipts(key: AssignmentKey): Promise<OutboxReceipt[]> {
    const rows = this.sql("SELECT * FROM receipts WHERE assignment_id = ? AND generation = ? ORDER BY position").all(
      key.assignmentId,
      key.generation,
    ) as ReceiptRow[];
    return rows.map(toReceipt);
  }

  /**
   * Scans claims in the order they were saved and stops at the first one made at or after `before`,
   * so a prune reads what it deletes and the few claims of that time still open, never the whole
   * store. Committed without an fsync: a deletion lost to a power failure is made by the next prune.
   */
  async pruneSettled(before: number, limit: number): Promise<number> {
    let deleted = 0;
    await this.write("committed", () => {
      // Counted afresh on each run: a batch that rolls back runs its writes again (`commitBatch`).
      deleted = 0;
      let after = 0;
      for (;;) {
        const rows = this.sql(
          "SELECT rowid AS row, assignment_id, generation, phase, created_at, updated_at FROM assignments WHERE rowid > ? ORDER BY rowid LIMIT 256",
        ).all(after) as Array<Pick<AssignmentRow, "assignment_id" | "generation" | "phase" | "created_at" | "updated_at"> & { row: number }>;
        if (rows.length === 0) return;
        for (const r of rows) {
          if (r.created_at >= before || deleted >= limit) return;
          after = r.row;
          if (!FINAL_PHASES.has(r.phase) || r.updated_at >= before) continue;
          this.sql("DELETE FROM receipts WHERE assignment_id = ? AND generation = ?").run(r.assignment_id, r.generation);
          this.sql("DELETE FROM assignments WHERE rowid = ?").run(r.row);
          deleted++;
        }
      }
    });
    return deleted;
  }

  async close(): Promise<void> {
    if (!this.db.open) return;
    this.flush();
    try {
      await new Promise<void>((resolve, reject) => {
        this.unsynced.push({ resolve, reject });
        this.syncWal();
      });
    } finally {
      if (this.walFd !== undefined) closeSync(this.walFd);
      this.db.close();
    }
  }

  /**
   * Group commit. A write is queued and its promise resolves once it is committed and, when
   * `synced`, fsynced, as the store contract requires (see `Durability`); every write queued until the event loop
   * comes round goes into one transaction (should one throw, a phase conflict say, the batch runs
   * again with each write in its own savepoint, so that it rolls back and rejects alone), and every commit made while an fsync runs
   * waits for the next one. Claims in flight at once then share one fsync instead of paying one each.
   */
  private write(durability: Durability, op: () => void): Promise<void> {
    return new Promise((resolve, reject) => {
      if (this.syncError !== undefined) return reject(this.syncError);
      this.queued.push({ op, durability, resolve, reject });
      if (this.queued.length === 1) setImmediate(() => this.flush());
    });
  }

  private flush(): void {
    const batch = this.queued.splice(0);
    if (batch.length === 0) return;
    const failures = new Map<QueuedWrite, unknown>();
    try {
      this.commitBatch(batch, failures);
    } catch (err) {
      // The commit itself failed: none of the batch is stored.
      for (const w of batch) w.reject(err);
      return;
    }
    for (const w of batch) {
      if (failures.has(w)) w.reject(failures.get(w));
      else if (w.durability === "synced") this.unsynced.push(w);
      else {
        w.resolve();
        if (w.durability === "committed_syncing") this.unsynced.push(NOBODY_WAITS);
      }
    }
    this.syncWal();
  }

  /**
   * One fsync at a time of the WAL file, covering every commit made before it began (the WAL is
   * appended in commit order, and a checkpoint fsyncs the WAL and the database itself before the WAL
   * is reused, so that file, the same one for as long as the store is open, holds or has passed on
   * every commit).
   */
  private syncWal(): void {
    if (this.syncing || this.unsynced.length === 0) return;
    const waiting = this.unsynced.splice(0);
    const settle = (err: unknown) => {
      if (err) this.syncError ??= err;
      for (const w of waiting) {
        if (this.syncError === undefined) w.resolve();
        else w.reject(this.syncError);
      }
    };
    if (this.syncError !== undefined) return settle(undefined);
    try {
      this.walFd ??= this.openWal();
    } catch (err) {
      return settle(err);
    }
    // Data and size, as SQLite syncs a WAL itself: the file's other metadata is not needed to read it.
    const started = performance.now();
    if (waiting.length === 1 && waiting[0] !== NOBODY_WAITS && this.lastSyncMs < this.inlineFsyncBelowMs) {
      // Nothing can commit while it runs: no write is left unsynced after it.
      let failure: unknown;
      try {
        fdatasyncSync(this.walFd);
      } catch (err) {
        failure = err;
      }
      this.lastSyncMs = performance.now() - started;
      return settle(failure);
    }
    this.syncing = true;
    fdatasync(this.walFd, (err) => {
      this.lastSyncMs = performance.now() - started;
      this.syncing = false;
      settle(err);
      this.syncWal();
    });
  }

  private openWal(): number {
    // Its own descriptor: closing it cannot drop SQLite's POSIX locks, which are on the database file.
    const fd = openSync(`${absolute(this.path)}-wal`, "r+");
    // SQLite fsyncs the directory of a new WAL on the WAL's first fsync, which is now this class's.
    // (Not on Windows: a directory cannot be opened there, and SQLite does not sync one either.)
    if (process.platform !== "win32") {
      const dir = openSync(dirname(absolute(this.path)), "r");
      try {
        fsyncSync(dir);
      } finally {
        closeSync(dir);
      }
    }
    return fd;
  }

  private sql(text: string): Database.Statement {
    let statement = this.statements.get(text);
    if (!statement) this.statements.set(text, (statement = this.db.prepare(text)));
    return statement;
  }

  private insertReceipt(r: OutboxReceipt): void {
    this.sql(
      `INSERT INTO receipts (receipt_id, assignment_id, generation, kind, body_json, saved_at, answer_status, answer_code, answer_reason, answered_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ).run(
      r.receiptId,
      r.assignmentId,
      r.generation,
      r.kind,
      receiptBodyText(r.body),
      r.savedAt,
      r.answer?.status ?? null,
      r.answer?.code ?? null,
      r.answer?.reason ?? null,
      r.answer?.answeredAt ?? null,
    );
  }

  private changePhase(key: AssignmentKey, change: PhaseChange): void {
    const result = this.sql("UPDATE assignments SET phase = ?, updated_at = ? WHERE assignment_id = ? AND generation = ? AND phase = ?").run(
      change.to,
      Date.now(),
      key.assignmentId,
      key.generation,
      change.from,
    );
    if (result.changes === 1) return;
    const actual = this.sql("SELECT phase FROM assignments WHERE assignment_id = ? AND generation = ?").pluck().get(key.assignmentId, key.generation) as
      Phase | undefined;
    throw new PhaseConflictError(key, change.from, actual);
  }
}

interface Waiter {
  resolve: () => void;
  reject: (err: unknown) => void;
}

/**
 * When a write's promise resolves: after its commit and an fsync of the WAL begun after it
 * (`synced`); once committed (`committed`: the next synced write, or `close`, makes it durable); or
 * once committed, with an fsync begun at once on the thread pool that nobody waits for
 * (`committed_syncing`: no write may follow to make it durable, and what it saves leaves meanwhile).
 */
type Durability = "synced" | "committed" | "committed_syncing";

/** The waiter of an fsync begun for a `committed_syncing` write: never on the event loop, which its receipt is leaving by. */
const NOBODY_WAITS: Waiter = { resolve: () => undefined, reject: () => undefined };

interface QueuedWrite extends Waiter {
  /** The write's statements; run again when its batch rolled back, so it changes nothing outside the database. */
  op: () => void;
  durability: Durability;
}

interface AssignmentRow {
  assignment_id: string;
  generation: number;
  phase: Phase;
  grant_json: string;
  created_at: number;
  updated_at: number;
}

interface ReceiptRow {
  receipt_id: string;
  assignment_id: string;
  generation: number;
  kind: string;
  body_json: string;
  saved_at: number;
  answer_status: StoredAnswer["status"] | null;
  answer_code: string | null;
  answer_reason: string | null;
  answered_at: number | null;
}

function toAssignment(row: AssignmentRow): LocalAssignment {
  return {
    assignmentId: row.assignment_id,
    generation: row.generation,
    // Re-validated: the file is outside the process and a grant drives what the runner publishes.
    grant: Grant.parse(parseExactJson(row.grant_json)),
    phase: row.phase,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

function toReceipt(row: ReceiptRow): OutboxReceipt {
  const receipt: OutboxReceipt = {
    receiptId: row.receipt_id,
    assignmentId: row.assignment_id,
    generation: row.generation,
    kind: ReceiptKind.parse(row.kind),
    body: parseExactJson(row.body_json) as ReceiptBody,
    savedAt: row.saved_at,
  };
  if (row.answer_status !== null && row.answered_at !== null) {
    receipt.answer = { status: row.answer_status, answeredAt: row.answered_at };
    if (row.answer_code !== null) receipt.answer.code = row.answer_code;
    if (row.answer_reason !== null) receipt.answer.reason = row.answer_reason;
  }
  return receipt;
}
