/**
 * The shape every compared system runs with, beside the call itself (bench/lib/protocol-messages.ts):
 * 4 workers (toolgate executors) in one process, 32 calls at once each, room for 100 in flight.
 */
export const WORKERS = 4;
export const CONCURRENCY_EACH = 32;

/**
 * A bench process's side of its lifecycle (`spawnBenchChild`): says `ready` once it serves, and on
 * SIGTERM runs `stop` (closing what it consumes, draining its connections), then exits.
 */
export function readyUntilStopped(stop: () => Promise<unknown>): void {
  process.once("SIGTERM", () => void stop().finally(() => process.exit(0)));
  process.stdout.write("ready\n");
}

/** Handles each item of `items` as it comes, at most `max` at once; resolves once all are handled. */
export async function forEachBounded<T>(
  items: AsyncIterable<T>,
  max: number,
  handle: (item: T) => Promise<void>,
  onError: (err: unknown) => void,
): Promise<void> {
  const running = new Set<Promise<void>>();
  for await (const item of items) {
    while (running.size >= max) await Promise.race(running);
    const one = handle(item)
      .catch(onError)
      .finally(() => running.delete(one));
    running.add(one);
  }
  await Promise.all(running);
}
