import { describe, expect, it } from "vitest";
import { CanonicalJsonError } from "../../src/budget/index.js";
import { argumentDigest, canonicalDigest } from "../../src/wire/digest.js";

describe("digests", () => {
  it("are the sha256 of the canonical JSON, whatever the key order: the value another language computes", () => {
    // sha256 of the UTF-8 bytes {"a":1,"b":[true,null,"é"]}, computed outside JavaScript.
    const expected = "9488dd13ca33d3291f5a91a1833dfa164811755ffba538c2b340780f8c31a0cb";
    expect(argumentDigest({ b: [true, null, "é"], a: 1 })).toBe(expected);
    expect(canonicalDigest({ a: 1, b: [true, null, "é"] })).toBe(expected);
  });

  it("stay the same when computed again and again (the writer's buffer is reused between them)", () => {
    const big = { text: "x".repeat(200_000) };
    const first = canonicalDigest(big);
    expect(canonicalDigest({ a: 1 })).not.toBe(first);
    expect(canonicalDigest(big)).toBe(first);
  });

  it("refuse a value JSON cannot carry", () => {
    expect(() => argumentDigest({ n: Number.NaN })).toThrow(CanonicalJsonError);
  });
});
