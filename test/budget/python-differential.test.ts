/**
 * Differential test against the reference itself: Python's json.loads + json.dumps(..., ensure_ascii=False,
 * sort_keys=True, separators=(",", ":"), allow_nan=False), run by python3 once for the file over a few
 * hundred random JSON texts (numbers at every edge, escapes, astral keys). measure's path (parse, then
 * canonical JSON) must give the same bytes, or fail where Python fails. Lone surrogates are left out: Python
 * writes them raw and cannot encode the result as UTF-8 (toolgate writes the `\udXXX` escape instead).
 */
import { spawnSync } from "node:child_process";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { buildContextPreview, canonicalJson, parseExactJson } from "../../src/budget/index.js";

const PYTHON = `
import json, sys
for line in sys.stdin.buffer.read().decode("utf-8").split("\\n")[:-1]:
    try:
        out = json.dumps(json.loads(line), ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (ValueError, RecursionError) as e:
        out = "ERROR " + type(e).__name__
    sys.stdout.buffer.write(out.encode("utf-8") + b"\\n")
`;

const digits = (min: number, max: number) => fc.array(fc.integer({ min: 0, max: 9 }), { minLength: min, maxLength: max }).map((d) => d.join(""));
const intToken = fc.oneof(
  fc.constantFrom(
    "0",
    "-0",
    "9007199254740992",
    "9007199254740993",
    "-9007199254740993",
    "99999999999999999",
    "1000000000000000000000",
    "18446744073709551615",
    "-9223372036854775808",
  ),
  fc.tuple(fc.boolean(), fc.integer({ min: 1, max: 9 }), digits(0, 40)).map(([neg, first, rest]) => `${neg ? "-" : ""}${first}${rest}`),
  fc.tuple(fc.integer({ min: 1, max: 9 }), digits(390, 410)).map(([first, rest]) => `${first}${rest}`), // a 400-digit integer
);
const floatToken = fc.oneof(
  fc.constantFrom(
    "1.0",
    "0.0",
    "-0.0",
    "1e16",
    "1E16",
    "1e+16",
    "1e-5",
    "1E-05",
    "2.50",
    "1e22",
    "1e308",
    "1.7976931348623157e308",
    "5e-324",
    "1e-400",
    "1e400",
    "-1e400",
    "0.1",
    "9007199254740993.0",
    "123.456e7",
    "1e-7",
    "0.0001",
    "9999999999999998.0",
  ),
  fc
    .tuple(intToken, digits(1, 20), fc.option(fc.tuple(fc.constantFrom("e", "E", "e+", "e-", "E-"), fc.integer({ min: 0, max: 330 }))))
    .map(([int, frac, exp]) => `${int.slice(0, 25)}.${frac}${exp ? `${exp[0]}${exp[1]}` : ""}`),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((d) => String(d)),
);
const unit = fc.oneof(
  { weight: 5, arbitrary: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCodePoint(c)) },
  { weight: 2, arbitrary: fc.constantFrom('"', "\\", "\n", "\t", "\u0000", "\u001f", "\u007f", "\u2028", "\u2029", "\u200d", "\ufeff", "/") },
  { weight: 2, arbitrary: fc.integer({ min: 0x80, max: 0xd7ff }).map((c) => String.fromCodePoint(c)) },
  { weight: 2, arbitrary: fc.integer({ min: 0x1f300, max: 0x10ffff }).map((c) => String.fromCodePoint(c)) },
);
/** A string token, sometimes with \\uXXXX escapes where JSON.stringify would write raw characters. */
const stringToken = fc
  .tuple(fc.string({ unit, maxLength: 12 }), fc.boolean())
  .map(([s, escapeAll]) =>
    escapeAll ? `"${Array.from({ length: s.length }, (_, i) => `\\u${s.charCodeAt(i).toString(16).padStart(4, "0")}`).join("")}"` : JSON.stringify(s),
  );
const ws = fc.constantFrom("", "", " ", "\r\t "); // no "\n": it separates the texts
const jsonText: fc.Arbitrary<string> = fc.letrec<{ value: string }>((tie) => ({
  value: fc.oneof(
    { maxDepth: 4, depthIdentifier: "text" },
    { weight: 3, arbitrary: fc.oneof(intToken, floatToken, stringToken, fc.constantFrom("true", "false", "null")) },
    { weight: 1, arbitrary: fc.tuple(fc.array(tie("value"), { maxLength: 5 }), ws).map(([items, w]) => `[${w}${items.join(`${w},`)}]`) },
    {
      weight: 1,
      arbitrary: fc
        .tuple(fc.array(fc.tuple(stringToken, tie("value")), { maxLength: 5 }), ws)
        .map(([members, w]) => `{${members.map(([k, v]) => `${k}${w}:${w}${v}`).join(",")}}`),
    },
  ),
})).value;

/** What toolgate writes for a JSON text, or ERROR where it refuses it. */
function toolgate(text: string): string {
  try {
    return canonicalJson(parseExactJson(text));
  } catch {
    return "ERROR";
  }
}

describe("differential against Python's json.dumps", () => {
  it("agrees byte for byte on a few hundred random JSON texts, and on which ones cannot be written", () => {
    // Fixed cases first: a value Python cannot write is refused only where a duplicate key does not replace it.
    const fixed = ['{"a":1e400,"a":1}', '{"a":[-1e400,{"b":9' + "9".repeat(4400) + '}],"a":2.0}', '{"a":{"x":-1e400},"b":1.5e3}', "[1e400]"];
    // Numbers after whitespace, and strings that look numeric inside (a digest, a time): read exactly either way.
    fixed.push(
      " 1.0",
      "\t-2.50e3 ",
      "[1, 2.0]",
      "[1 ,\r9007199254740993]",
      '{"d":"0123456789abcdef3e1e","n":1}',
      '{"t":"12:30.5, [7.0"}',
      '{"d":"3e5","x":[1 , 1.0]}',
    );
    const texts = [...fixed, ...fc.sample(jsonText, 400)];
    const run = spawnSync("python3", ["-c", PYTHON], { input: Buffer.from(texts.join("\n") + "\n", "utf8"), maxBuffer: 64 << 20 });
    expect(run.status, run.stderr.toString()).toBe(0);
    const expected = run.stdout.toString("utf8").split("\n").slice(0, -1);
    expect(expected).toHaveLength(texts.length);
    texts.forEach((text, i) => {
      const python = expected[i] as string;
      const ours = toolgate(text);
      expect(ours.startsWith("ERROR") ? "ERROR" : ours, text).toBe(python.startsWith("ERROR") ? "ERROR" : python);
      if (!python.startsWith("ERROR"))
        expect(buildContextPreview(parseExactJson(text), { maxResultContextBytes: 1024 }).original_bytes).toBe(Buffer.byteLength(python, "utf8"));
    });
  });
});
