import { LRUCache } from "lru-cache";

/**
 * Facts that never change once established (which run an assignment belongs to, which agent a run
 * serves), remembered by this process up to `capacity`; the least recently used is forgotten first
 * (in constant time: see `RevisionCache`). Forgetting one costs a read, never a wrong answer.
 */
export class Remembered<K extends NonNullable<unknown>, V extends NonNullable<unknown>> {
  private readonly facts: LRUCache<K, V>;

  constructor(capacity: number) {
    this.facts = new LRUCache({ max: capacity });
  }

  get(key: K): V | undefined {
    return this.facts.get(key);
  }

  remember(key: K, value: V): void {
    if (!this.facts.has(key)) this.facts.set(key, value);
  }
}
