import Database from "better-sqlite3";
import type { ExecutorEvidence, OutboxEntry, SideEffect } from "./history.js";

/**
 * A write tool's side-effect ledger: one row per business operation actually performed, written by
 * the executor in the same step as the effect. Deliberately no unique key on the operation key: a
 * second run of the same operation must show up as a second row, for the checker to count.
 */
export class SideEffectLedger {
  private readonly db: Database.Database;
  private readonly insert: Database.Statement;

  constructor(path: string, executorId: string) {
    this.db = new Database(path);
    this.db.pragma("journal_mode = WAL");
    this.db.pragma("synchronous = FULL");
    this.db.exec("CREATE TABLE IF NOT EXISTS owner (executor_id TEXT NOT NULL)");
    this.db.exec(
      "CREATE TABLE IF NOT EXISTS effects (executor_id TEXT NOT NULL, assignment_id TEXT NOT NULL, generation INTEGER NOT NULL, operation_key TEXT NOT NULL)",
    );
    // The owner row says whose completed writes this ledger must account for, even while it is empty.
    if (this.db.prepare("SELECT count(*) FROM owner").pluck().get() === 0) this.db.prepare("INSERT INTO owner (executor_id) VALUES (?)").run(executorId);
    this.insert = this.db.prepare(
      "INSERT INTO effects (executor_id, assignment_id, generation, operation_key) VALUES (@executor_id, @assignment_id, @generation, @operation_key)",
    );
  }

  record(effect: SideEffect): void {
    this.insert.run(effect);
  }

  close(): void {
    this.db.close();
  }
}

/** What the executors recorded: side-effect ledgers and runner stores (their outboxes), read from SQLite files. */
export function readEvidence(files: { ledgers?: readonly string[]; outboxes?: readonly string[] }): ExecutorEvidence {
  const evidence: ExecutorEvidence = { ledgerExecutors: [], sideEffects: [], outboxExecutors: [], outbox: [] };
  for (const path of files.ledgers ?? []) {
    withDb(path, (db) => {
      const rows = db.prepare("SELECT executor_id, assignment_id, generation, operation_key FROM effects").all() as SideEffect[];
      evidence.sideEffects.push(...rows);
      evidence.ledgerExecutors.push(...(db.prepare("SELECT executor_id FROM owner").pluck().all() as string[]));
    });
  }
  for (const path of files.outboxes ?? []) {
    withDb(path, (db) => {
      const executor = db.prepare("SELECT value FROM meta WHERE key = 'executor_id'").pluck().get() as string | undefined;
      if (!executor) return;
      evidence.outboxExecutors.push(executor);
      const rows = db.prepare("SELECT receipt_id, assignment_id, kind, answer_status, answer_code FROM receipts ORDER BY position").all() as Array<
        Omit<OutboxEntry, "executor_id">
      >;
      evidence.outbox.push(...rows.map((r) => ({ executor_id: executor, ...r })));
    });
  }
  return evidence;
}

function withDb(path: string, read: (db: Database.Database) => void): void {
  // Not readonly: a store left by a killed process still has its WAL, which opening replays. A runner
  // still holding its exclusive lock makes this fail at once, as it should (stop the executor first).
  const db = new Database(path, { fileMustExist: true, timeout: 0 });
  try {
    read(db);
  } finally {
    db.close();
  }
}
