import { projectionDigest, type CheckReport, type ProjectionSnapshot } from "./check.js";
import type { StoredHistory } from "./history.js";

/** The digest of every stored projection, to compare a later check against. */
export function snapshotOf(history: StoredHistory): ProjectionSnapshot {
  return Object.fromEntries(history.projections.map((p) => [p.assignment_id, projectionDigest(p.context_preview)]));
}

const shown = (counts: Record<string, number>) =>
  Object.entries(counts)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, n]) => `${k} ${n}`)
    .join(", ") || "none";

/** The human summary: counts, then one line per violation (at most `limit`). */
export function formatReport(report: CheckReport, limit = 50): string {
  const c = report.counts;
  const lines = [
    `runs: ${shown(c.runs)}`,
    `tool calls: ${shown(c.tool_calls)}; background task results ${c.task_results}`,
    `receipts: ${c.receipts_in_stream} in the stream; index ${shown(c.receipt_index)}; applied by tool calls ${c.applied_receipts}; indexed by their progress ${c.indexed_by_progress}; progress ${c.progress}; projections ${c.projections}`,
    `executors: ${c.side_effects} side effects, ${c.outbox_receipts} outbox receipts`,
  ];
  if (report.ok) return [...lines, "check-history: no violations"].join("\n");
  const byRule: Record<string, number> = {};
  for (const v of report.violations) byRule[v.rule] = (byRule[v.rule] ?? 0) + 1;
  lines.push(`check-history: ${report.violations.length} violation(s): ${shown(byRule)}`);
  for (const v of report.violations.slice(0, limit)) {
    const ids = [
      v.run_id && `run ${v.run_id}`,
      v.assignment_id && `call ${v.assignment_id}`,
      v.receipt_id && `receipt ${v.receipt_id}`,
      v.operation_key && `op ${v.operation_key}`,
    ].filter(Boolean);
    lines.push(`  ${v.rule}: ${v.message}${ids.length ? ` (${ids.join(", ")})` : ""}`);
  }
  if (report.violations.length > limit) lines.push(`  ... and ${report.violations.length - limit} more (--json lists all)`);
  return lines.join("\n");
}
