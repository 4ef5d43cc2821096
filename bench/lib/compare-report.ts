/** The markdown tables of a comparison (stdout) and the targets of the hot-path issue, checked against them. */
import { medianOfRounds, type Comparison, type LevelResult } from "./compare.js";
import { runsToolgate } from "./systems/registry.js";

const fixed = (v: number, digits = 2) => (Number.isFinite(v) ? v.toFixed(digits) : "–");
const rate = (v: number) => (Number.isFinite(v) ? Math.round(v).toLocaleString("en-US") : "–");
const byValue = (counts: Record<string, number>, digits: number) =>
  Object.entries(counts)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k} ${fixed(v, digits)}`)
    .join(", ");

function table(header: string[], rows: string[][]): string {
  return [`| ${header.join(" | ")} |`, `| ${header.map(() => "---").join(" | ")} |`, ...rows.map((r) => `| ${r.join(" | ")} |`)].join("\n");
}

/** The share of a paced level's rate a system must reach to count as having kept up with it. */
const KEPT_UP = 0.95;

/** `cores`: the machine's, for the CPU bound (the calls/s its CPU allows); `pacedTo`: the calls/s the levels were paced to. */
export function markdownReport(comparison: Comparison, cores: number, pacedTo?: number): string {
  const { skipped } = comparison;
  const results = medianOfRounds(comparison.results);
  const ids = [...new Set(results.map((r) => r.id))];
  const levels = [...new Set(results.map((r) => r.concurrency))];
  const at = (id: string, level: number) => results.find((r) => r.id === id && r.concurrency === level);
  const name = (id: string) => results.find((r) => r.id === id)!.name;
  const spread = (r: LevelResult) => (r.callsPerSecRange ? ` (${rate(r.callsPerSecRange[0])}–${rate(r.callsPerSecRange[1])})` : "");
  const cell = (r: LevelResult | undefined) =>
    !r ? "" : r.error && !r.callsPerSecRange ? "failed" : `${rate(r.callsPerSec)}${spread(r)} · ${fixed(r.p50)} / ${fixed(r.p99)} ms`;
  const out: string[] = [];
  const rounds = Math.max(...results.map((r) => r.round));
  if (rounds > 1) out.push(`Each figure is the median of ${rounds} rounds (calls/s: median, then lowest–highest in brackets).`, "");

  // A paced level's CPU per call is the dearer one of a lower rate: the calls/s it would allow say nothing of saturation.
  const withBound = !pacedTo;
  const bound = withBound
    ? `CPU bound = ${cores} cores ÷ that CPU: the calls/s this machine could carry with nothing else on it, steadier than calls/s while others load the machine`
    : "no CPU bound, as a call's CPU at a paced rate is not its CPU at saturation";
  out.push(`Calls/s · p50 / p99 latency; CPU ms per call of all the system's processes (a call's cost wherever it is spent); ${bound}:`);
  out.push("");
  out.push(
    table(
      [
        "system",
        ...levels.map((l) => `${l} in flight: calls/s · p50 / p99`),
        ...levels.map((l) => `CPU ms/call at ${l}`),
        ...(withBound ? [`CPU bound at ${levels[levels.length - 1]}`] : []),
        "writes/call",
        "messages/call",
      ],
      ids.map((id) => {
        const last = at(id, levels[levels.length - 1]!);
        return [
          name(id),
          ...levels.map((l) => cell(at(id, l))),
          ...levels.map((l) => fixed(at(id, l)?.cpuMsTotal ?? Number.NaN)),
          ...(withBound ? [`${rate((cores * 1000) / (last?.cpuMsTotal ?? Number.NaN))}/s`] : []),
          fixed(last?.writesPerCall ?? Number.NaN, 1),
          last ? `${fixed(last.messagesPerCall, 1)} ${last.messageUnit === "Redis commands" ? "Redis cmds" : "NATS msgs"}` : "",
        ];
      }),
    ),
  );
  out.push("");
  out.push(
    "Each level: CPU ms per call of each process; read+write system calls per call (– where /proc/<pid>/io is not readable: another user's process); CPU ms the other, idle systems used meanwhile:",
  );
  out.push("");
  out.push(
    table(
      [
        "system",
        "in flight",
        "calls",
        "calls/s",
        "p50 ms",
        "p95 ms",
        "p99 ms",
        "CPU ms/call",
        "CPU ms/call by process",
        "syscalls/call by process",
        "idle others CPU ms",
      ],
      results.map((r) => [
        r.name,
        String(r.concurrency),
        String(r.calls),
        `${rate(r.callsPerSec)}${spread(r)}`,
        fixed(r.p50),
        fixed(r.p95),
        fixed(r.p99),
        fixed(r.cpuMsTotal),
        r.error ? `failed: ${r.error.split("\n")[0]}` : byValue(r.cpuMs, 2),
        byValue(r.syscalls, 1),
        fixed(r.idleOthersCpuMs, 0),
      ]),
    ),
  );
  out.push("");
  out.push(
    "Persisted writes per call by stream (KV buckets are streams `KV_<bucket>`) or Redis write command, and messages per call by kind (`<role> in` published by, `<role> out` delivered to) or Redis command:",
  );
  out.push("");
  out.push(
    table(
      ["system", "in flight", "writes/call", "by stream or command", "messages/call", "by kind"],
      results.map((r) => [r.name, String(r.concurrency), fixed(r.writesPerCall), byValue(r.writes, 2), fixed(r.messagesPerCall, 1), byValue(r.messages, 1)]),
    ),
  );
  for (const s of skipped) out.push("", `Skipped ${s.id}: ${s.reason}`);
  if (pacedTo) {
    out.push("", ...pacedLines(results, pacedTo));
  } else {
    const targets = targetLines(results);
    if (targets.length > 0) out.push("", ...targets);
  }
  const baseline = baselineLines(results, levels);
  if (baseline.length > 0) out.push("", ...baseline);
  return out.join("\n");
}

/**
 * What a paced run can say: which levels kept up with the rate (their CPU per call is at the same
 * load, comparable across systems), which fell behind (a closed loop at their own rate). The
 * targets are set on closed-loop levels, so they are not judged here.
 */
function pacedLines(results: LevelResult[], pacedTo: number): string[] {
  const behind = results.filter((r) => !r.error && r.callsPerSec < KEPT_UP * pacedTo);
  return [
    `Paced to ${rate(pacedTo)} calls/s: the targets are judged on closed-loop runs (no BENCH_RATE), not on this one.`,
    behind.length === 0
      ? "Every level that ran kept up with the rate: CPU per call is compared at the same load."
      : `Fell behind the rate (a closed loop at their own rate, not the same load): ${behind.map((r) => `${r.name} at ${r.concurrency} in flight (${rate(r.callsPerSec)}/s)`).join("; ")}.`,
  ];
}

/** The targets of the hot-path issue, for each toolgate system measured (BullMQ's figure from the same run). */
function targetLines(results: LevelResult[]): string[] {
  const bullmq = results.find((r) => r.id === "bullmq" && r.concurrency === 100);
  const verdict = (ok: boolean) => (ok ? "met" : "MISSED");
  const lines: string[] = [];
  for (const id of new Set(results.filter((r) => runsToolgate(r.id)).map((r) => r.id))) {
    const hundred = results.find((r) => r.id === id && r.concurrency === 100 && !r.error);
    const one = results.find((r) => r.id === id && r.concurrency === 1 && !r.error);
    const parts: string[] = [];
    if (hundred) {
      parts.push(`at 100 in flight ${rate(hundred.callsPerSec)}/s >= 1,800: ${verdict(hundred.callsPerSec >= 1_800)}`);
      if (bullmq && !bullmq.error)
        parts.push(`${fixed(hundred.callsPerSec / bullmq.callsPerSec)}x BullMQ >= 0.35: ${verdict(hundred.callsPerSec >= 0.35 * bullmq.callsPerSec)}`);
      parts.push(`CPU ${fixed(hundred.cpuMsTotal)} ms/call <= 1.0: ${verdict(hundred.cpuMsTotal <= 1)}`);
      parts.push(`${fixed(hundred.writesPerCall)} writes/call <= 9: ${verdict(hundred.writesPerCall <= 9)}`);
      parts.push(`${fixed(hundred.messagesPerCall, 1)} messages/call <= 40: ${verdict(hundred.messagesPerCall <= 40)}`);
    }
    if (one) {
      const limit = id.startsWith("toolgate-runner") ? 4 : 3;
      parts.push(`p50 at 1 in flight ${fixed(one.p50)} ms <= ${limit}: ${verdict(one.p50 <= limit)}`);
    }
    if (parts.length > 0) lines.push(`targets (${id}): ${parts.join("; ")}`);
  }
  return lines;
}

/** Each toolgate system against its baseline (`<id>@<commit>`) at each level: after ÷ before. */
function baselineLines(results: LevelResult[], levels: number[]): string[] {
  const pairs = [...new Set(results.map((r) => r.id))]
    .filter((id) => id.includes("@"))
    .map((before) => [before, before.slice(0, before.indexOf("@"))] as const);
  if (pairs.length === 0) return [];
  const rows = pairs.flatMap(([before, after]) =>
    levels.map((l) => {
      const b = results.find((r) => r.id === before && r.concurrency === l);
      const a = results.find((r) => r.id === after && r.concurrency === l);
      if (!a || !b) return [after, String(l), "", "", "", "", ""];
      return [
        after,
        String(l),
        `${rate(b.callsPerSec)} → ${rate(a.callsPerSec)}`,
        `${fixed(a.callsPerSec / b.callsPerSec)}x`,
        `${fixed(b.p50)} → ${fixed(a.p50)}`,
        `${fixed(b.cpuMsTotal)} → ${fixed(a.cpuMsTotal)}`,
        `${fixed(b.writesPerCall, 1)} / ${fixed(b.messagesPerCall, 0)} → ${fixed(a.writesPerCall, 1)} / ${fixed(a.messagesPerCall, 0)}`,
      ];
    }),
  );
  return [
    "Before (baseline ref) → after (this tree), same run, alternated level by level:",
    "",
    table(["system", "in flight", "calls/s", "after ÷ before", "p50 ms", "CPU ms/call", "writes / messages per call"], rows),
  ];
}
