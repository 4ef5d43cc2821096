import { VersionedStore } from "../../src/kv/versioned-store.js";

/** A store whose process dies at its first compare-and-set: what a step before it wrote stays, nothing after it happens. */
export class DyingStore<T> extends VersionedStore<T> {
  override mutate(): never {
    throw new Error("the process died");
  }
}
