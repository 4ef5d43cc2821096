/**
 * Runs `task` for every item, at most `limit` at once, in the items' order of start; resolves when
 * all have run and rejects with the first failure (the tasks already started run on). The bound keeps
 * one operation over many records (a run's end, a history, a sweep's clean-up) from flooding NATS.
 */
export async function forEachConcurrently<T>(items: readonly T[], limit: number, task: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    for (let i = next++; i < items.length; i = next++) await task(items[i]!, i);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}
