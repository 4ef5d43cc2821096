/**
 * The ToolRunner's store on this machine's disk, one claim at a time (the way a call at 1 in flight
 * meets it): how long saving a claim with its `accepted` takes to resolve for a read (committed;
 * `isReadClaim`) and for a write (committed and fdatasynced), and a progress receipt after it
 * (durable, which also makes a read's claim durable). Alternated read/write, so both see the same disk.
 *
 *   npm run bench:store            # BENCH_STORE_CLAIMS=2000 by default
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { argumentDigest } from "../src/wire/digest.js";
import type { Grant } from "../src/wire/messages.js";
import { buildReceipt } from "../src/runner/receipts.js";
import { SqliteRunnerStore } from "../src/runner/sqlite-store.js";
import { percentile } from "./lib/stats.js";

const CLAIMS = Number(process.env.BENCH_STORE_CLAIMS ?? 2_000);

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

const dir = mkdtempSync(join(tmpdir(), "toolgate-bench-store-"));
const store = new SqliteRunnerStore(join(dir, "runner.db"));
await store.open("exec-bench");
const timings = { read: { claim: [] as number[], progress: [] as number[] }, write: { claim: [] as number[], progress: [] as number[] } };
try {
  for (let i = 0; i < CLAIMS; i++) {
    const kind = i % 2 === 0 ? "read" : "write";
    const g = grant(i, kind);
    const now = Date.now();
    const accepted = buildReceipt(g, { kind: "accepted", operation_key: g.operation_key, argument_digest: g.argument_digest }, now);
    let t = process.hrtime.bigint();
    await store.createAssignment({ assignmentId: g.assignment_id, generation: 0, grant: g, phase: "accepting", createdAt: now, updatedAt: now }, [accepted]);
    timings[kind].claim.push(ms(t));
    await store.recordAnswer(accepted.receiptId, { status: "recorded", answeredAt: now }, { from: "accepting", to: "confirmed" });
    t = process.hrtime.bigint();
    await store.appendReceipt(buildReceipt(g, { kind: "progress", seq: 1, progress: { done: 1, total: 2 } }, now));
    timings[kind].progress.push(ms(t));
    if (i > 0 && i % 500 === 0) process.stderr.write(`bench:store: ${i}/${CLAIMS} claims\n`);
  }
} finally {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
}

const row = (what: string, values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const f = (p: number) => percentile(sorted, p).toFixed(3);
  return `| ${what} | ${values.length} | ${f(50)} | ${f(95)} | ${f(99)} |`;
};
console.log(`SqliteRunnerStore, ${CLAIMS} claims one at a time (alternated read/write), ms until the promise resolves:\n`);
console.log("| step | n | p50 | p95 | p99 |\n| --- | --- | --- | --- | --- |");
console.log(row("read's claim with `accepted` (committed)", timings.read.claim));
console.log(row("write's claim with `accepted` (committed + fdatasync)", timings.write.claim));
console.log(row("progress after a read's claim (durable)", timings.read.progress));
console.log(row("progress after a write's claim (durable)", timings.write.progress));
