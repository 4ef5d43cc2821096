import { readFileSync } from "node:fs";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { CanonicalJsonError, MAX_NESTING_DEPTH, canonicalJson, compactByteLength, encodeCanonicalJson } from "../../src/budget/index.js";
import { formatNumber } from "../../src/budget/json-numbers.js";
import { jsonValue } from "./arbitraries.js";

// A copy of the shared protocol vectors (shared/vectors/budget-bytes.json), produced by the Python reference.
const vectors = JSON.parse(readFileSync(new URL("../fixtures/budget-bytes.json", import.meta.url), "utf8")) as {
  cases: { result: unknown; original_bytes: number; canonical: string }[];
};

/** An independent, slow reference: JSON.stringify escapes strings as Python does; keys by code point arrays. */
function reference(v: unknown): string {
  if (typeof v === "number") return formatNumber(v);
  if (typeof v !== "object" || v === null) return JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map(reference).join(",")}]`;
  const byCodePoint = (a: string, b: string): number => {
    const x = Array.from(a, (c) => c.codePointAt(0) as number);
    const y = Array.from(b, (c) => c.codePointAt(0) as number);
    for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return (x[i] as number) - (y[i] as number);
    return x.length - y.length;
  };
  const keys = Object.keys(v).sort(byCodePoint);
  return `{${keys.map((k) => `${JSON.stringify(k)}:${reference((v as Record<string, unknown>)[k])}`).join(",")}}`;
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

describe("canonical compact JSON", () => {
  it.each(vectors.cases.map((c, i) => [i, c] as const))("shared vector %i: canonical text and original_bytes byte for byte", (_, c) => {
    expect(canonicalJson(c.result)).toBe(c.canonical);
    expect(Buffer.from(encodeCanonicalJson(c.result)).equals(Buffer.from(c.canonical, "utf8"))).toBe(true);
    expect(compactByteLength(c.result)).toBe(c.original_bytes);
  });

  it("sorts keys by code point, not UTF-16 code unit", () => {
    expect(canonicalJson({ "😀": 1, "｡": 2, a: 3, "\ud800": 4, "\ue000": 5 })).toBe('{"a":3,"\\ud800":4,"\ue000":5,"｡":2,"😀":1}');
    expect(canonicalJson({ "\ud83dx": 1, "\ud83d\ude00": 2 })).toBe('{"\\ud83dx":1,"😀":2}');
  });

  it("escapes like Python with ensure_ascii=False and writes lone surrogates as escapes", () => {
    expect(canonicalJson('"\\\b\f\n\r\t\u0000\u001f\u007f\u2028é')).toBe('"\\"\\\\\\b\\f\\n\\r\\t\\u0000\\u001f\u007f\u2028é"');
    expect(canonicalJson("a\ud800b\udfffc😀")).toBe('"a\\ud800b\\udfffc😀"');
    expect(strictUtf8.decode(encodeCanonicalJson("\udc00\ud800"))).toBe('"\\udc00\\ud800"');
  });

  it.each([
    [1e-4, "0.0001"],
    [1e-5, "1e-05"],
    [0.00012, "0.00012"],
    [1.5e-7, "1.5e-07"],
    [-2.5e-5, "-2.5e-05"],
    [9.999999999999999e-5, "9.999999999999999e-05"],
    [5e-324, "5e-324"],
    [2.2250738585072014e-308, "2.2250738585072014e-308"],
    [0.1 + 0.2, "0.30000000000000004"],
    [123456789.125, "123456789.125"],
    [-0.5, "-0.5"],
    [1e21, "1e+21"],
    [1e300, "1e+300"],
    [1.7976931348623157e308, "1.7976931348623157e+308"],
    // eslint-disable-next-line no-loss-of-precision -- the case is a literal past 2**53 that JS rounds
    [12345678901234567, "1.2345678901234568e+16"],
    [2 ** 53 + 2, "9007199254740994.0"],
    [2 ** 53, "9007199254740992"],
    [-12345678901, "-12345678901"],
    [2 ** 31, "2147483648"],
    [-(2 ** 31) + 1, "-2147483647"],
    [-0, "0"],
  ])("writes the number %d as %s (integer digits up to 2**53, otherwise Python's repr of the float)", (n, text) => {
    expect(canonicalJson(n)).toBe(text);
  });

  it.each([
    [NaN, "$", /NaN/],
    [{ a: [1, { b: Infinity }] }, "$.a[1].b", /Infinity/],
    [{ a: undefined }, "$.a", /undefined/],
    // eslint-disable-next-line no-sparse-arrays -- the case is an array with a hole
    [[1, , 3], "$[1]", /undefined/],
    [{ f: () => 1 }, "$.f", /function/],
    [{ s: Symbol("x") }, "$.s", /symbol/],
    [{ n: 10n ** 4300n }, "$.n", /4301 digits/],
    [{ "a b": { d: new Date(0) } }, '$["a b"].d', /Date object is not a plain JSON object/],
    [{ m: new Map() }, "$.m", /Map object/],
  ])("rejects %o at %s", (value, path, reason) => {
    let caught: unknown;
    try {
      canonicalJson(value);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(CanonicalJsonError);
    expect((caught as CanonicalJsonError).path).toBe(path);
    expect((caught as CanonicalJsonError).reason).toMatch(reason);
  });

  it("rejects a cycle, naming where it closes", () => {
    const o: { items: unknown[] } = { items: [1] };
    o.items.push({ back: o });
    expect(() => canonicalJson(o)).toThrow(
      expect.objectContaining({ name: "CanonicalJsonError", path: "$.items[1].back", reason: expect.stringMatching(/cycle/) }),
    );
  });

  it(`accepts ${MAX_NESTING_DEPTH} levels of nesting and rejects deeper`, () => {
    let deep: unknown = 0;
    for (let i = 0; i < MAX_NESTING_DEPTH; i++) deep = [deep];
    expect(compactByteLength(deep)).toBe(2 * MAX_NESTING_DEPTH + 1);
    expect(() => compactByteLength([deep])).toThrow(/nesting deeper than 1000 levels/);
  });

  it("accepts objects without prototype", () => {
    const o = Object.assign(Object.create(null) as object, { b: 1, a: 2 });
    expect(canonicalJson(o)).toBe('{"a":2,"b":1}');
  });

  it("matches the reference writer, is valid UTF-8 and parses back (3,000 generated values)", () => {
    fc.assert(
      fc.property(jsonValue, (v) => {
        const bytes = encodeCanonicalJson(v);
        const text = strictUtf8.decode(bytes);
        expect(text).toBe(reference(v));
        expect(Buffer.from(new TextEncoder().encode(text)).equals(Buffer.from(bytes))).toBe(true);
        expect(JSON.parse(text)).toEqual(JSON.parse(JSON.stringify(v)));
      }),
      { numRuns: 3000 },
    );
  });
});
