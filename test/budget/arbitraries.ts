/** fast-check generators for tool results: nesting, long strings, CJK, emoji, escapes, lone surrogates. */
import fc from "fast-check";

const fromCodes = (min: number, max: number) => fc.integer({ min, max }).map((c) => String.fromCodePoint(c));

/** One code point (or a lone surrogate), weighted toward what makes measuring and cutting hard. */
const unit = fc.oneof(
  { weight: 6, arbitrary: fromCodes(0x20, 0x7e) },
  { weight: 2, arbitrary: fc.constantFrom('"', "\\", "\n", "\t", "\u0000", "\u001f", "\u007f", "\u2028", "/") },
  { weight: 3, arbitrary: fromCodes(0x4e00, 0x9fff) }, // CJK
  { weight: 2, arbitrary: fromCodes(0x1f300, 0x1faff) }, // emoji, a surrogate pair in UTF-16
  { weight: 1, arbitrary: fromCodes(0xd800, 0xdfff) }, // lone surrogate
  { weight: 1, arbitrary: fromCodes(0x80, 0x7ff) },
  { weight: 1, arbitrary: fromCodes(0xe000, 0xffff) },
);

const shortString = fc.string({ unit, maxLength: 24 });

/** Mostly short strings; some long ones, built by repetition so that generating them stays cheap. */
export const text = fc.oneof(
  { weight: 5, arbitrary: shortString },
  { weight: 2, arbitrary: fc.tuple(fc.string({ unit, minLength: 1, maxLength: 30 }), fc.integer({ min: 10, max: 200 })).map(([s, n]) => s.repeat(n)) },
);

const key = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      "id",
      "user_id",
      "status",
      "state",
      "next_cursor",
      "cursor",
      "next_page_token",
      "page_token",
      "has_more",
      "total",
      "count",
      "error",
      "code",
    ),
  },
  { weight: 1, arbitrary: fc.constantFrom("data", "items", "result", "meta", "a.b", "", "0", "10", "9", "😀", "｡", "\ud800") },
  { weight: 3, arbitrary: shortString },
);

const number = fc.oneof(
  fc.integer(),
  fc.integer({ min: -(2 ** 53), max: 2 ** 53 }),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.constantFrom(0, -0, 1e-5, 1.5e-7, 1e21, 0.1),
);

const scalar = fc.oneof(fc.constant(null), fc.boolean(), number, text);
const shortScalar = fc.oneof(fc.constant(null), fc.boolean(), number, shortString);

/** Any JSON value: nested objects and arrays, up to a few levels (see deep() for long chains). */
export const jsonValue: fc.Arbitrary<unknown> = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { maxDepth: 4, depthIdentifier: "json" },
    { weight: 3, arbitrary: scalar },
    { weight: 2, arbitrary: fc.array(tie("value"), { maxLength: 6 }) },
    { weight: 2, arbitrary: fc.dictionary(key, tie("value"), { maxKeys: 6 }) },
  ),
})).value;

/** A value wrapped in up to 60 levels of objects and arrays. */
const deep = fc
  .tuple(jsonValue, fc.array(fc.oneof(key, fc.constant(null)), { maxLength: 60 }))
  .map(([v, wrappers]) => wrappers.reduce<unknown>((inner, k) => (k === null ? [inner] : { [k]: inner }), v));

/** Results of a few bytes up to about 100 KiB: lists of records repeated to exceed the larger budgets. */
export const toolResult: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 2, arbitrary: jsonValue },
  { weight: 1, arbitrary: deep },
  {
    weight: 4,
    arbitrary: fc
      .tuple(
        fc.dictionary(key, scalar, { maxKeys: 5 }),
        fc.array(fc.dictionary(key, shortScalar, { maxKeys: 6 }), { minLength: 1, maxLength: 4 }),
        fc.integer({ min: 1, max: 800 }),
      )
      .map(([head, items, copies]) => ({ ...head, data: { items: Array.from({ length: copies }, (_, i) => items[i % items.length]) } })),
  },
);

/** The budget edges of docs/protocol.md section 5 and anything between. */
export const budget = fc.oneof(fc.constantFrom(1024, 1025, 16384, 32767, 32768), fc.integer({ min: 1024, max: 32768 }));

const base64 = fc.integer({ min: 0, max: 40000 }).map((n) => "iVBOR".repeat(n / 5));

/** Every MCP content block type, in the shapes that are exempt (binary) and those that count. */
const nonTextBlock = fc.oneof(
  fc.record({ type: fc.constant("image"), mimeType: fc.constant("image/png"), data: base64 }),
  fc.record({ type: fc.constant("audio"), mimeType: fc.constant("audio/wav"), data: fc.string({ maxLength: 50 }) }),
  fc.record({ type: fc.constant("resource"), resource: fc.record({ uri: fc.constant("file:///r.txt"), text }) }),
  fc.record({
    type: fc.constant("resource"),
    resource: fc.record({ uri: fc.constant("file:///r.bin"), mimeType: fc.constant("application/pdf"), blob: base64 }),
  }),
  fc.record({ type: fc.constant("resource_link"), uri: fc.constant("file:///l.txt"), name: shortString, description: text }),
  fc.record({ type: fc.constant("text"), text: jsonValue.filter((v) => typeof v !== "string") }), // a text that is no string
  fc.record({ type: fc.constantFrom("x-unknown", "image"), note: text }), // an unknown type; an image without data
);

/** MCP-style results: text blocks (some long) among every other block type. */
export const multimodalResult = fc.record(
  {
    content: fc.array(fc.oneof({ weight: 3, arbitrary: fc.record({ type: fc.constant("text"), text }) }, nonTextBlock), { minLength: 1, maxLength: 8 }),
    isError: fc.boolean(),
    structuredContent: jsonValue,
  },
  { requiredKeys: ["content"] },
);

/** Many small text blocks: each one's share of the budget falls below the size of a cut notice. */
export const manyTextBlocks = fc
  .tuple(fc.integer({ min: 5, max: 400 }), fc.integer({ min: 20, max: 300 }), fc.string({ unit: "grapheme", minLength: 1, maxLength: 4 }))
  .map(([n, size, s]) => ({ content: Array.from({ length: n }, (_, i) => ({ type: "text", text: `${i}:${s.repeat(size)}`.slice(0, size) })) }));
