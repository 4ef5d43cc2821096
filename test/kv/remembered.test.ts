import { describe, expect, it } from "vitest";
import { Remembered } from "../../src/kv/remembered.js";

describe("Remembered", () => {
  it("keeps the first value of a fact and forgets the oldest fact beyond its capacity", () => {
    const facts = new Remembered<string, string>(2);
    facts.remember("asg-1", "run-1");
    facts.remember("asg-1", "run-other");
    facts.remember("asg-2", "run-2");
    expect(facts.get("asg-1")).toBe("run-1");
    facts.remember("asg-3", "run-3");
    expect(facts.get("asg-1")).toBeUndefined();
    expect(facts.get("asg-2")).toBe("run-2");
    expect(facts.get("asg-3")).toBe("run-3");
  });
});
