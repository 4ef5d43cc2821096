/** Resolves after `ms`, or as soon as `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}

/** A wake-up call for loops that wait on a condition (a free slot, an empty set...). */
export class Notifier {
  private waiters: Array<() => void> = [];

  notify(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const wake of waiters) wake();
  }

  /** Resolves on the next `notify`, or after `ms` at the latest (the caller re-checks its condition). */
  wait(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(wake, ms);
      function wake() {
        clearTimeout(timer);
        resolve();
      }
      this.waiters.push(wake);
    });
  }
}
