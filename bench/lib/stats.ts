/** Small statistics helpers shared by the benchmarks. */

export function percentile(sortedAscending: readonly number[], p: number): number {
  if (sortedAscending.length === 0) return Number.NaN;
  const rank = Math.min(sortedAscending.length - 1, Math.max(0, Math.ceil((p / 100) * sortedAscending.length) - 1));
  return sortedAscending[rank]!;
}

export function median(values: readonly number[]): number {
  return percentile(
    [...values].sort((a, b) => a - b),
    50,
  );
}

/** Runs `task` with at most `concurrency` in flight until `total` have run; returns elapsed ms. */
export async function runConcurrently(total: number, concurrency: number, task: (i: number) => Promise<void>): Promise<number> {
  let next = 0;
  const start = performance.now();
  const worker = async () => {
    while (next < total) await task(next++);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, total) }, worker));
  return performance.now() - start;
}

export function formatRate(perSecond: number): string {
  return `${Math.round(perSecond).toLocaleString("en-US")}/s`;
}
