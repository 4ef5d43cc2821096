/** Property tests for the edges of issue 18: escapes at the cuts, nesting near the limit, what is preserved, msgpack numbers. */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  CanonicalJsonError,
  JsonFloat,
  MAX_NESTING_DEPTH,
  MAX_RESULT_DEPTH,
  buildContextPreview,
  canonicalJson,
  type PreviewResult,
} from "../../src/budget/index.js";
import { decode, encode } from "../../src/wire/codec.js";
import { budget } from "./arbitraries.js";

/** Offsets of canonical text where no escape sequence is split (an independent left-to-right tokenizer). */
function boundaries(canonical: string): Set<number> {
  const at = new Set<number>([0]);
  for (const m of canonical.matchAll(/\\u[0-9a-f]{4}|\\.|[\s\S]/g)) at.add((m.index ?? 0) + m[0].length);
  return at;
}

const escapeDense = fc
  .tuple(
    fc.array(fc.constantFrom("\u0001", "\u001f", '"', "\\", "\n", "\ud800", "a", "é", "😀"), { minLength: 1, maxLength: 12 }),
    fc.integer({ min: 100, max: 3000 }),
  )
  .map(([units, n]) => ({ s: units.join("").repeat(n), n }));

describe("projection edges", () => {
  it("never starts or ends head and tail inside an escape sequence of the canonical text", () => {
    fc.assert(
      fc.property(escapeDense, budget, (result, max) => {
        const preview = buildContextPreview(result, { maxResultContextBytes: max });
        if (!preview.truncated) return;
        const canonical = canonicalJson(result);
        const { head, tail } = (preview.result as unknown as PreviewResult).preview;
        const ok = boundaries(canonical);
        expect(canonical.startsWith(head) && ok.has(head.length)).toBe(true);
        expect(canonical.endsWith(tail) && ok.has(canonical.length - tail.length)).toBe(true);
        expect(preview.retained_bytes).toBeLessThanOrEqual(max);
      }),
      { numRuns: 400 },
    );
  });

  it("emits only what it can write: an accepted result nests at most MAX_RESULT_DEPTH, and its envelopes fit", () => {
    fc.assert(
      fc.property(fc.integer({ min: MAX_RESULT_DEPTH - 3, max: MAX_NESTING_DEPTH + 2 }), fc.boolean(), (depth, big) => {
        let result: unknown = big ? "x".repeat(5000) : 1;
        for (let i = 0; i < depth; i++) result = i % 2 ? [result] : { k: result };
        let preview;
        try {
          preview = buildContextPreview(result, { maxResultContextBytes: 1024 });
        } catch (err) {
          expect(err).toBeInstanceOf(CanonicalJsonError);
          expect(depth).toBeGreaterThan(MAX_RESULT_DEPTH);
          return;
        }
        expect(depth).toBeLessThanOrEqual(MAX_RESULT_DEPTH);
        // History: {tool_calls: [{context_preview: {...}}]} and more, up to the reserved envelope depth.
        let envelope: unknown = preview;
        for (let i = 0; i < MAX_NESTING_DEPTH - MAX_RESULT_DEPTH - 1; i++) envelope = [envelope];
        expect(() => canonicalJson(envelope)).not.toThrow();
      }),
      { numRuns: 60 },
    );
  });

  it("keeps the cursor and the status ahead of many competing ids, shorter values first", () => {
    fc.assert(
      fc.property(fc.integer({ min: 5, max: 60 }), fc.integer({ min: 20, max: 110 }), fc.constantFrom(1024, 4096, 16384), (ids, size, max) => {
        const result: Record<string, unknown> = {};
        for (let i = 0; i < ids; i++) result[`a${String(i).padStart(2, "0")}_id`] = "i".repeat(size);
        result.short_id = "s";
        Object.assign(result, { status: "ok", data: { next_cursor: "c-2", rows: "r".repeat(40000) } });
        const preview = buildContextPreview(result, { maxResultContextBytes: max });
        const fields = (preview.result as unknown as PreviewResult).preserved_fields;
        expect(fields).toMatchObject({ status: "ok", "data.next_cursor": "c-2", short_id: "s" });
        expect(Object.keys(fields)).toEqual(Object.keys(fields).sort());
      }),
      { numRuns: 200 },
    );
  });

  it("carries integers of any size and integral floats through msgpack exactly", () => {
    const exactNumber = fc.oneof(
      fc.bigInt({ min: -(2n ** 64n), max: 2n ** 64n }).map((n) => (n >= -(2n ** 53n) && n <= 2n ** 53n ? Number(n) : n)),
      fc.bigInt({ min: -(10n ** 60n), max: 10n ** 60n }).filter((n) => n > 2n ** 53n || n < -(2n ** 53n)),
      fc.integer({ min: -(2 ** 53), max: 2 ** 53 }).map((n) => new JsonFloat(n)),
      fc.double({ noNaN: true, noDefaultInfinity: true }).filter((d) => !Number.isInteger(d) || Math.abs(d) > 2 ** 53),
    );
    fc.assert(
      fc.property(fc.array(exactNumber, { maxLength: 20 }), (numbers) => {
        const back = decode(z.unknown(), encode({ numbers }));
        expect(canonicalJson(back)).toBe(canonicalJson({ numbers }));
      }),
      { numRuns: 500 },
    );
  });
});
