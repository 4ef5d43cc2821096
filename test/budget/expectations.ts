/** Assertions shared by the property tests of the projection. */
import { expect } from "vitest";
import { canonicalJson, compactByteLength, encodeCanonicalJson, type ContextPreview, type PreviewResult } from "../../src/budget/index.js";
import { isStatusKey, PRESERVED_MAX_DEPTH } from "../../src/budget/preserved-fields.js";

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/** The projected result is canonical JSON that is valid UTF-8 and parses; returns its text. */
export function expectValidJson(preview: ContextPreview): string {
  const bytes = encodeCanonicalJson(preview.result);
  const text = strictUtf8.decode(bytes);
  expect(Buffer.from(new TextEncoder().encode(text)).equals(Buffer.from(bytes))).toBe(true);
  expect(JSON.parse(text)).toEqual(JSON.parse(JSON.stringify(preview.result)));
  expect(preview.retained_bytes).toBe(bytes.length);
  return text;
}

/** The value at a dotted path of preserved_fields (an index segment on arrays, a key on objects). */
function valueAt(root: unknown, path: string): unknown {
  return path.split(".").reduce<unknown>((v, segment) => (v as Record<string, unknown>)[segment], root);
}

export function expectPreviewOf(original: unknown, projected: PreviewResult, budget: number, originalBytes: number): void {
  const canonical = canonicalJson(original);
  const { head, tail, omitted_bytes } = projected.preview;
  expect(canonical.startsWith(head)).toBe(true);
  expect(canonical.endsWith(tail)).toBe(true);
  expect(head.length + tail.length).toBeLessThanOrEqual(canonical.length);
  expect(omitted_bytes).toBe(originalBytes - Buffer.byteLength(head) - Buffer.byteLength(tail));
  expect(compactByteLength(projected)).toBeGreaterThanOrEqual(budget - 64);
  for (const [path, value] of Object.entries(projected.preserved_fields)) {
    const segments = path.split(".");
    expect(segments.length).toBeLessThanOrEqual(PRESERVED_MAX_DEPTH);
    expect(isStatusKey(segments.at(-1) as string)).toBe(true);
    expect(Object.is(valueAt(original, path), value)).toBe(true);
  }
}

const TEXT_NOTICE = /\n\[toolgate: (\d+) bytes of this text omitted, max_result_context_bytes=\d+\]\n/;

/** A cut text block split back into head, the omitted byte count of its notice, and tail. */
export function splitCutText(cut: string): { head: string; omitted: number; tail: string } {
  const match = TEXT_NOTICE.exec(cut);
  expect(match).not.toBeNull();
  const at = match?.index ?? 0;
  return { head: cut.slice(0, at), omitted: Number(match?.[1]), tail: cut.slice(at + (match?.[0].length ?? 0)) };
}
