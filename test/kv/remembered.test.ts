import { describe, expect, it } from "vitest";
import { Remembered } from "../../src/kv/remembered.js";

describe("Remembered", () => {
  it("keeps the first value of a fact and forgets the least recently used fact beyond its capacity", () => {
    const facts = new Remembered<string, string>(2);
    facts.remember("asg-1", "run-1");
    facts.remember("asg-1", "run-other");
    facts.remember("asg-2", "run-2");
    expect(facts.get("asg-1")).toBe("run-1");
    // asg-1 was just read, asg-2 was not: asg-2 is the one to go.
    facts.remember("asg-3", "run-3");
    expect(facts.get("asg-2")).toBeUndefined();
    expect(facts.get("asg-1")).toBe("run-1");
    expect(facts.get("asg-3")).toBe("run-3");
    // asg-1 was read before asg-3: asg-1 goes now.
    facts.remember("asg-4", "run-4");
    expect(facts.get("asg-1")).toBeUndefined();
    expect(facts.get("asg-3")).toBe("run-3");
    expect(facts.get("asg-4")).toBe("run-4");
  });

  it("stays within its capacity and keeps the latest facts through many evictions", () => {
    const facts = new Remembered<string, number>(100);
    for (let i = 0; i < 10_000; i++) facts.remember(`asg-${i}`, i);
    expect(facts.get("asg-9899")).toBeUndefined();
    for (let i = 9_900; i < 10_000; i++) expect(facts.get(`asg-${i}`)).toBe(i);
  });
});
