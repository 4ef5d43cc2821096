/**
 * Projection (canonical measuring + head/tail preview) of results of 64 KiB, 1 MiB and 8 MiB against
 * JSON.stringify of the same value in the same process. Target (issue 2): 1 MiB within 3x JSON.stringify.
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

const cases = [
  { label: "64 KiB", bytes: 64 * 1024, iterations: 200 },
  { label: "1 MiB", bytes: 1024 * 1024, iterations: 100 },
  { label: "8 MiB", bytes: 8 * 1024 * 1024, iterations: 15 },
];

const rows: string[][] = [["size", "original_bytes", "JSON.stringify ms", "projection ms", "ratio"]];
for (const c of cases) {
  process.stderr.write(`bench:projection: ${c.label}, ${c.iterations} iterations\n`); // progress; the table goes to stdout
  const value = listing(c.bytes);
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
