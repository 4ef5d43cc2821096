/**
 * A producer's wait for its calls' completions, told by a watch (a KV watch of the records the
 * gateway settles): a completion can arrive before the answer that named its call, so early ones
 * are remembered.
 */
export class CompletionWatch {
  private readonly seen = new Set<string>();
  private readonly waiters = new Map<string, () => void>();

  constructor(private readonly timeoutMs: number) {}

  arrived(id: string): void {
    const waiter = this.waiters.get(id);
    if (!waiter) return void this.seen.add(id);
    this.waiters.delete(id);
    waiter();
  }

  done(id: string): Promise<void> {
    if (this.seen.delete(id)) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no completion of ${id} within ${this.timeoutMs} ms`)), this.timeoutMs);
      this.waiters.set(id, () => {
        clearTimeout(timer);
        resolve();
      });
    });
  }
}
