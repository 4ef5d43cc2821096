/**
 * Projection (canonical measuring + head/tail preview) of results of several shapes against JSON.stringify
 * of the same value in the same process: a listing of records at 64 KiB, 1 MiB and 8 MiB, and at 1 MiB one
 * long string, an escape-dense string, a number-heavy listing and a multimodal result of many text blocks.
 * Target: every 1 MiB shape within 3x JSON.stringify.
 */
import { buildContextPreview } from "../src/budget/index.js";

/** Deterministic pseudo-random numbers, so every run measures the same values. */
function lcg(seed: number): () => number {
  let s = seed;
  return () => (s = (s * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
}

/** A paginated listing of records as a tool would return it: keys in producer order, mixed scripts. */
function listing(targetBytes: number): unknown {
  const rand = lcg(42);
  const words = ["alpha", "任务", "déjà vu", "😀", "line\nbreak", 'say "hi"', "path\\to", "报告生成", "ok"];
  const pick = () => words[Math.floor(rand() * words.length)] as string;
  const items: unknown[] = [];
  let bytes = 0;
  for (let i = 0; bytes < targetBytes; i++) {
    const item = {
      id: `item-${i}`,
      title: `${pick()} ${pick()} ${i}`,
      description: Array.from({ length: 8 }, pick).join(" "),
      status: rand() < 0.8 ? "open" : "closed",
      score: Math.round(rand() * 1e6) / 100,
      tags: [pick(), pick()],
      owner: { user_id: Math.floor(rand() * 1e6), name: pick() },
      created_at: "2025-01-01T00:00:00Z",
    };
    items.push(item);
    bytes += Buffer.byteLength(JSON.stringify(item)) + 1;
  }
  return { status: "ok", total: items.length * 3, items, next_cursor: "cursor-abc" };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
}

function time(f: () => unknown): number {
  const start = process.hrtime.bigint();
  f();
  return Number(process.hrtime.bigint() - start) / 1e6;
}

const MiB = 1024 * 1024;

/** Numbers of every kind: integers, floats, ids beyond 2**53 as a JS executor would send them. */
function numbers(targetBytes: number): unknown {
  const rand = lcg(7);
  const rows = Array.from({ length: Math.floor(targetBytes / 64) }, (_, i) => ({ id: i, v: rand() * 1e6, n: Math.floor(rand() * 2 ** 52), r: rand() }));
  return { status: "ok", rows };
}

/** An MCP result of many short text blocks, the shape whose every block is cut. */
function manyTextBlocks(targetBytes: number): unknown {
  return { content: Array.from({ length: Math.floor(targetBytes / 220) }, (_, i) => ({ type: "text", text: `block ${i} `.padEnd(200, "文本 text ") })) };
}

const cases = [
  { label: "listing 64 KiB", value: () => listing(64 * 1024), iterations: 200 },
  { label: "listing 1 MiB", value: () => listing(MiB), iterations: 100 },
  { label: "listing 8 MiB", value: () => listing(8 * MiB), iterations: 15 },
  { label: "one string 1 MiB", value: () => ({ text: "lorem ipsum 任务 ".repeat(MiB / 20) }), iterations: 100 },
  { label: "escapes 1 MiB", value: () => ({ text: 'line\n"quoted"\t\u0001 '.repeat(MiB / 24) }), iterations: 100 },
  { label: "numbers 1 MiB", value: () => numbers(MiB), iterations: 100 },
  { label: "text blocks 1 MiB", value: () => manyTextBlocks(MiB), iterations: 100 },
];

const rows: string[][] = [["shape", "original_bytes", "JSON.stringify ms", "projection ms", "ratio"]];
for (const c of cases) {
  process.stderr.write(`bench:projection: ${c.label}, ${c.iterations} iterations\n`); // progress; the table goes to stdout
  const value = c.value();
  const project = () => buildContextPreview(value, { maxResultContextBytes: 16384 });
  const stringify = () => JSON.stringify(value);
  for (let i = 0; i < 5; i++) {
    stringify();
    project();
  }
  const s: number[] = [];
  const p: number[] = [];
  for (let i = 0; i < c.iterations; i++) {
    s.push(time(stringify)); // interleaved, so both see the same machine state
    p.push(time(project));
  }
  const ratio = median(p) / median(s);
  rows.push([c.label, String(project().original_bytes), median(s).toFixed(2), median(p).toFixed(2), `${ratio.toFixed(2)}x`]);
}
const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] as string).length)));
for (const r of rows) process.stdout.write(r.map((cell, i) => cell.padStart(widths[i] as number)).join("  ") + "\n");
