import type { Versioned } from "./versioned-store.js";

/**
 * The values this process last wrote or read of a bucket's keys, with their revisions, up to
 * `capacity` keys (the least recently stored forgotten first). A cached value may be stale: another
 * process may have written the key since. So it may only start a compare-and-set (a stale revision
 * fails it, and the loop reads again) or a decision that a fresh read confirms before it refuses
 * anything; see `VersionedStore.recent`.
 */
export class RevisionCache<T> {
  private readonly entries = new Map<string, Versioned<T>>();

  constructor(private readonly capacity: number) {}

  get(key: string): Versioned<T> | undefined {
    return this.entries.get(key);
  }

  /** Keeps `entry` unless a later revision of the key is already kept. */
  store(key: string, entry: Versioned<T>): void {
    const kept = this.entries.get(key);
    if (kept && kept.revision > entry.revision) return;
    this.entries.delete(key);
    if (this.entries.size >= this.capacity) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(key, entry);
  }

  forget(key: string): void {
    this.entries.delete(key);
  }
}
