import { describe, expect, it } from "vitest";
import { buildReceipt } from "../../src/runner/receipts.js";
import { isFirstProgress, nextProgressSeq } from "../../src/runner/store.js";
import { sampleGrant } from "./helpers/grants.js";

const grant = sampleGrant({ tool_kind: "read" });
const accepted = buildReceipt(grant, { kind: "accepted", operation_key: grant.operation_key, argument_digest: grant.argument_digest }, 1);
const progress = (seq: number) => buildReceipt(grant, { kind: "progress", seq, progress: { seq } }, 1);

describe("progress numbering across a restart", () => {
  it("starts a first run at 1, and continues after the highest saved seq", () => {
    expect(nextProgressSeq([accepted], false)).toBe(1);
    expect(nextProgressSeq([accepted, progress(1), progress(2)], true)).toBe(3);
    // A run numbered from 2 after an earlier restart: the count (1) would give 2 again.
    expect(nextProgressSeq([accepted, progress(2)], true)).toBe(3);
  });

  it("skips seq 1 after a restart when none is saved: a first report, saved without an fsync, may have reached the gateway and been lost here", () => {
    expect(nextProgressSeq([accepted], true)).toBe(2);
    expect(nextProgressSeq([], true)).toBe(2);
  });

  it("lets only seq 1 leave before its fsync", () => {
    expect([progress(1), progress(2), accepted].map(isFirstProgress)).toEqual([true, false, false]);
  });
});
