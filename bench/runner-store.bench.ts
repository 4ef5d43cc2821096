/**
 * The ToolRunner's store on this machine's disk, one claim at a time (the way a call at 1 in flight
 * meets it): how long saving a claim with its `accepted` takes to resolve for a read (committed;
 * `isReadClaim`) and for a write (committed and fdatasynced), and a progress receipt after it
 * (a second one: durable, which also makes a read's claim durable). Alternated read/write, so both see
 * the same disk, and the store as the runner opens it with one that keeps every fsync on libuv's
 * thread pool (`inlineFsyncBelowMs: 0`), claim by claim. Then the store under many claims at once
 * (the way 100 calls in flight meet it): claims saved, answered and reported on in batches of
 * `BENCH_STORE_BATCH`, each step's writes queued together, as the runner's group commit takes them;
 * what counts there is the CPU each write costs the process.
 *
 *   npm run bench:store            # BENCH_STORE_CLAIMS=2000, BENCH_STORE_BATCH=50 by default
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { argumentDigest } from "../src/wire/digest.js";
import type { Grant } from "../src/wire/messages.js";
import { buildReceipt } from "../src/runner/receipts.js";
import { SqliteRunnerStore } from "../src/runner/sqlite-store.js";
import type { OutboxReceipt } from "../src/runner/store.js";
import { percentile } from "./lib/stats.js";

const CLAIMS = Number(process.env.BENCH_STORE_CLAIMS ?? 2_000);
const BATCH = Number(process.env.BENCH_STORE_BATCH ?? 50);

function grant(i: number, kind: Grant["tool_kind"]): Grant {
  const args = { query: `item ${i}` };
  return {
    assignment_id: `asg-${i}`,
    run_id: "run-bench",
    session_id: "ses-bench",
    executor_id: "exec-bench",
    tool_name: "bench.call",
    binding_id: "binding-bench",
    tool_kind: kind,
    arguments: args,
    argument_digest: argumentDigest(args),
    subject: "user-bench",
    agent: "agent-bench",
    agent_version: "agv-bench",
    toolset: "ts-bench",
    toolset_version: "tsv-bench",
    operation_key: `op-${i}`,
    claim_token: `${i}`.padStart(40, "c"),
    generation: 0,
    lease_expires_at: Date.now() + 30_000,
  };
}

const ms = (since: bigint) => Number(process.hrtime.bigint() - since) / 1e6;

/** A read or write claim as the runner saves it, with its `accepted`. */
function claimOf(g: Grant, now: number) {
  const accepted = buildReceipt(g, { kind: "accepted", operation_key: g.operation_key, argument_digest: g.argument_digest }, now);
  return { assignment: { assignmentId: g.assignment_id, generation: 0, grant: g, phase: "accepting" as const, createdAt: now, updatedAt: now }, accepted };
}

/** The gateway's answer to `accepted`, recorded with the claim's confirmation. */
const confirm = (store: SqliteRunnerStore, accepted: OutboxReceipt, now: number) =>
  store.recordAnswer(accepted.receiptId, { status: "recorded", answeredAt: now }, { from: "accepting", to: "confirmed" });

/** Claims `BATCH` at a time, reads: each saved with its `accepted`, answered, then reported on, each step's writes queued at once. The CPU counted is the store's: receipts are built before. */
async function batched(store: SqliteRunnerStore, first: number): Promise<{ writes: number; cpuUs: number }> {
  let writes = 0;
  let cpuUs = 0;
  for (let at = first; at < first + CLAIMS; at += BATCH) {
    const grants = Array.from({ length: Math.min(BATCH, first + CLAIMS - at) }, (_, i) => grant(at + i, "read"));
    const now = Date.now();
    const claims = grants.map((g) => claimOf(g, now));
    const reports = grants.map((g) => buildReceipt(g, { kind: "progress", seq: 1, progress: { done: 1, total: 1 } }, now));
    const started = process.cpuUsage();
    await Promise.all(claims.map((c) => store.createAssignment(c.assignment, [c.accepted])));
    await Promise.all(claims.map((c) => confirm(store, c.accepted, now)));
    await Promise.all(reports.map((r) => store.appendReceipt(r)));
    const cpu = process.cpuUsage(started);
    cpuUs += cpu.user + cpu.system;
    writes += grants.length * 3;
  }
  return { writes, cpuUs };
}

const dir = mkdtempSync(join(tmpdir(), "toolgate-bench-store-"));
/** The store as the runner opens it, and one that keeps every fsync on libuv's thread pool (as before `INLINE_FSYNC_BELOW_MS`). */
const modes = [
  { name: "fsync inline when fast (default)", store: new SqliteRunnerStore(join(dir, "inline.db")) },
  { name: "fsync on the thread pool only", store: new SqliteRunnerStore(join(dir, "pool.db"), { inlineFsyncBelowMs: 0 }) },
];
const timings = modes.map(() => ({ read: { claim: [] as number[], progress: [] as number[] }, write: { claim: [] as number[], progress: [] as number[] } }));
let batchedCost: { writes: number; cpuUs: number };
try {
  for (const { store } of modes) await store.open("exec-bench");
  try {
    for (let i = 0; i < CLAIMS; i++) {
      const kind = i % 2 === 0 ? "read" : "write";
      const g = grant(i, kind);
      // Alternated claim by claim, so both stores see the same disk.
      for (const [m, { store }] of modes.entries()) {
        const now = Date.now();
        const { assignment, accepted } = claimOf(g, now);
        let t = process.hrtime.bigint();
        await store.createAssignment(assignment, [accepted]);
        timings[m]![kind].claim.push(ms(t));
        await confirm(store, accepted, now);
        await store.appendReceipt(buildReceipt(g, { kind: "progress", seq: 1, progress: { done: 1, total: 2 } }, now));
        t = process.hrtime.bigint();
        await store.appendReceipt(buildReceipt(g, { kind: "progress", seq: 2, progress: { done: 2, total: 2 } }, now));
        timings[m]![kind].progress.push(ms(t));
      }
      if (i > 0 && i % 500 === 0) process.stderr.write(`bench:store: ${i}/${CLAIMS} claims\n`);
    }
  } finally {
    for (const { store } of modes) await store.close();
  }

  const batchStore = new SqliteRunnerStore(join(dir, "batched.db"));
  await batchStore.open("exec-bench");
  try {
    await batched(batchStore, CLAIMS); // warm: statements prepared, code compiled
    batchedCost = await batched(batchStore, 2 * CLAIMS);
  } finally {
    await batchStore.close();
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}

const row = (what: string, values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const f = (p: number) => percentile(sorted, p).toFixed(3);
  return `| ${what} | ${values.length} | ${f(50)} | ${f(95)} | ${f(99)} |`;
};
console.log(`SqliteRunnerStore, ${CLAIMS} claims one at a time (alternated read/write, and store by store), ms until the promise resolves:\n`);
console.log("| store | step | n | p50 | p95 | p99 |\n| --- | --- | --- | --- | --- | --- |");
modes.forEach(({ name }, m) => {
  const t = timings[m]!;
  console.log(`| ${name} ${row("read's claim with `accepted` (committed)", t.read.claim)}`);
  console.log(`| ${name} ${row("write's claim with `accepted` (committed + fdatasync)", t.write.claim)}`);
  console.log(`| ${name} ${row("a second progress report after a read's claim (durable)", t.read.progress)}`);
  console.log(`| ${name} ${row("a second progress report after a write's claim (durable)", t.write.progress)}`);
});
console.log(
  `\nThe store as the runner opens it, ${CLAIMS} read claims ${BATCH} at a time (saved with \`accepted\`, answered, reported on: ${batchedCost.writes} writes): ` +
    `${(batchedCost.cpuUs / batchedCost.writes).toFixed(1)} µs of CPU per write`,
);
