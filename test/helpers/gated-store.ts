import { VersionedStore } from "../../src/kv/versioned-store.js";

/** A store whose writes wait until the test opens the gate (a slow write), counting the compare-and-sets asked of it. */
export class GatedStore<T> extends VersionedStore<T> {
  mutations = 0;
  private opened!: () => void;
  private readonly gate = new Promise<void>((resolve) => (this.opened = resolve));

  open(): void {
    this.opened();
  }

  override async create(key: string, value: T) {
    await this.gate;
    return super.create(key, value);
  }

  override async mutate<R>(...args: Parameters<VersionedStore<T>["mutate"]>) {
    this.mutations += 1;
    await this.gate;
    return super.mutate(...(args as [string, never])) as Promise<R>;
  }
}
