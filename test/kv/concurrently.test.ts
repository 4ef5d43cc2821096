import { describe, expect, it } from "vitest";
import { forEachConcurrently } from "../../src/kv/concurrently.js";

describe("forEachConcurrently", () => {
  it("runs every item once with its index, never more than `limit` at once", async () => {
    let inFlight = 0;
    let most = 0;
    const seen: Array<[string, number]> = [];
    await forEachConcurrently(["a", "b", "c", "d", "e"], 2, async (item, i) => {
      most = Math.max(most, ++inFlight);
      await Promise.resolve();
      seen.push([item, i]);
      inFlight--;
    });
    expect(most).toBe(2);
    expect(seen.sort()).toEqual([
      ["a", 0],
      ["b", 1],
      ["c", 2],
      ["d", 3],
      ["e", 4],
    ]);
  });

  it("rejects with a task's failure", async () => {
    const failing = async (n: number): Promise<void> => {
      if (n === 2) throw new Error("two");
    };
    await expect(forEachConcurrently([1, 2, 3], 2, failing)).rejects.toThrow("two");
  });

  it("does nothing for no items", async () => {
    let ran = false;
    await forEachConcurrently([], 4, async () => {
      ran = true;
    });
    expect(ran).toBe(false);
  });
});
