/**
 * Facts that never change once established (which run an assignment belongs to, which agent a run
 * serves), remembered by this process up to `capacity`; the oldest is forgotten first. Forgetting one
 * costs a read, never a wrong answer.
 */
export class Remembered<K, V> {
  private readonly facts = new Map<K, V>();

  constructor(private readonly capacity: number) {}

  get(key: K): V | undefined {
    return this.facts.get(key);
  }

  remember(key: K, value: V): void {
    if (this.facts.has(key)) return;
    // A Map iterates in insertion order: the first key is the oldest fact.
    if (this.facts.size >= this.capacity) this.facts.delete(this.facts.keys().next().value!);
    this.facts.set(key, value);
  }
}
