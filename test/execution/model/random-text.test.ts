import { describe, expect, it } from "vitest";
import { randomBase64url } from "../../../src/execution/model/random-text.js";
import { assignmentIdFor, newRunId } from "../../../src/execution/model/ids.js";
import { claimTokenMatches, claimTokenSha256, newClaimToken } from "../../../src/execution/claims/claim-token.js";

describe("random text", () => {
  it("gives base64url of the asked length, never the same twice, across many refills of its page", () => {
    const seen = new Set<string>();
    for (let i = 0; i < 5_000; i++) {
      const text = randomBase64url(16); // 80,000 bytes: the 4 KiB page is drawn again about twenty times
      expect(text).toMatch(/^[A-Za-z0-9_-]{22}$/);
      seen.add(text);
    }
    expect(seen.size).toBe(5_000);
    expect(randomBase64url(32)).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  it("spreads its bytes evenly: each base64url character about as often as any other", () => {
    const counts = new Map<string, number>();
    for (let i = 0; i < 4_000; i++) for (const c of randomBase64url(30)) counts.set(c, (counts.get(c) ?? 0) + 1);
    // 160,000 characters over 64 symbols: 2,500 each; a stuck or repeated page would skew this far beyond 20%.
    expect(counts.size).toBe(64);
    for (const n of counts.values()) expect(Math.abs(n - 2_500)).toBeLessThan(500);
  });

  it("refuses more than a page at a time", () => {
    expect(() => randomBase64url(4097)).toThrow(RangeError);
  });

  it("is what run and assignment ids are made of", () => {
    expect(newRunId()).toMatch(/^run_[A-Za-z0-9_-]{22}$/);
    expect(assignmentIdFor("run_x", undefined)).toMatch(/^asg_[A-Za-z0-9_-]{22}$/);
    expect(newRunId()).not.toBe(newRunId());
  });

  it("is what claim tokens are made of: 32 bytes each, never the same twice, kept only as their sha256", () => {
    const tokens = new Set<string>();
    for (let i = 0; i < 1_000; i++) {
      const { token, sha256 } = newClaimToken(); // 32,000 bytes: the page is drawn again about eight times
      expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(sha256).toBe(claimTokenSha256(token));
      expect(claimTokenMatches(token, sha256)).toBe(true);
      tokens.add(token);
    }
    expect(tokens.size).toBe(1_000);
  });
});
