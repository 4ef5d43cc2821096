import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { buildContextPreview, compactByteLength, type PreviewResult } from "../../src/budget/index.js";
import { budget, manyTextBlocks, multimodalResult } from "./arbitraries.js";
import { expectPreviewOf, expectValidJson, splitCutText } from "./expectations.js";

type Block = Record<string, unknown> & { type: string };
type Resource = Record<string, unknown>;

const isBinaryMedia = (b: Block): boolean => (b.type === "image" || b.type === "audio") && typeof b.mimeType === "string" && typeof b.data === "string";
const blobResource = (b: Block): Resource | undefined =>
  b.type === "resource" && typeof (b.resource as Resource | undefined)?.blob === "string" ? (b.resource as Resource) : undefined;

/** The bytes that count, computed independently: the result with only binary contents emptied. */
function budgeted(result: { content: Block[] }): number {
  const content = result.content.map((b) => {
    if (isBinaryMedia(b)) return { ...b, data: "" };
    const resource = blobResource(b);
    return resource ? { ...b, resource: { ...resource, blob: "" } } : b;
  });
  return compactByteLength({ ...result, content });
}

/** The text of a block that may be cut: a text block's string text, an embedded resource's string text. */
function cuttable(b: Block): string | undefined {
  if (b.type === "text") return typeof b.text === "string" ? b.text : undefined;
  const resource = b.type === "resource" ? (b.resource as Resource | undefined) : undefined;
  return typeof resource?.text === "string" ? resource.text : undefined;
}

function check(result: { content: Block[] }, max: number): void {
  const preview = buildContextPreview(result, { maxResultContextBytes: max });
  expectValidJson(preview);
  const projected = preview.result as Record<string, unknown>;
  if (!preview.truncated) {
    expect(projected).toBe(result);
    expect(budgeted(result)).toBeLessThanOrEqual(max);
  } else if ("preview" in projected) {
    expectPreviewOf(result, projected as unknown as PreviewResult, max, preview.original_bytes);
    expect(preview.retained_bytes).toBeLessThanOrEqual(max);
  } else {
    const content = projected.content as Block[];
    expect(content).toHaveLength(result.content.length);
    content.forEach((block, i) => {
      const before = result.content[i] as Block;
      const was = cuttable(before);
      const now = cuttable(block);
      if (was === undefined || now === was) {
        expect(block).toEqual(before); // binary media, links, unknown types: kept whole
        return;
      }
      const { head, omitted, tail } = splitCutText(now as string);
      expect(was.startsWith(head) && was.endsWith(tail)).toBe(true);
      expect(omitted).toBe(Buffer.byteLength(was) - Buffer.byteLength(head) - Buffer.byteLength(tail));
    });
    // Everything but binary contents counts, and stays within budget however many blocks there are.
    expect(budgeted({ ...projected, content } as { content: Block[] })).toBeLessThanOrEqual(max);
  }
}

describe("multimodal projection properties", () => {
  it("only binary contents are exempt; every other block counts, text and resource text are cut; within budget", () => {
    fc.assert(
      fc.property(multimodalResult, budget, (result, max) => check(result as { content: Block[] }, max)),
      { numRuns: 1500 },
    );
  });

  it("stays within budget with many small text blocks", () => {
    fc.assert(
      fc.property(manyTextBlocks, budget, (result, max) => check(result as { content: Block[] }, max)),
      { numRuns: 300 },
    );
  });

  it("issue 18's cases: ten 100-byte blocks at 1,024, 400 of 200 bytes at 32,768, a 60,000-byte resource text at 1,024", () => {
    const blocks = (n: number, size: number) => ({ content: Array.from({ length: n }, () => ({ type: "text", text: "t".repeat(size) })) });
    expect(buildContextPreview(blocks(10, 100), { maxResultContextBytes: 1024 }).retained_bytes).toBeLessThanOrEqual(1024);
    expect(buildContextPreview(blocks(400, 200), { maxResultContextBytes: 32768 }).retained_bytes).toBeLessThanOrEqual(32768);
    const resource = { content: [{ type: "resource", resource: { uri: "file:///r", text: "R".repeat(60000) } }] };
    const preview = buildContextPreview(resource, { maxResultContextBytes: 1024 });
    expect(preview.truncated).toBe(true);
    expect(preview.retained_bytes).toBeLessThanOrEqual(1024);
    const image = {
      content: [
        { type: "image", mimeType: "image/png", data: "A".repeat(60000) },
        { type: "text", text: "ok" },
      ],
    };
    expect(buildContextPreview(image, { maxResultContextBytes: 1024 })).toMatchObject({ truncated: false, retained_bytes: compactByteLength(image) });
  });
});
