import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { buildContextPreview, canonicalJson, compactByteLength, contextPreviewSchema, PROJECTION_VERSION, type PreviewResult } from "../../src/budget/index.js";
import { splitCutText } from "./expectations.js";

const vectors = JSON.parse(readFileSync(new URL("../fixtures/budget-bytes.json", import.meta.url), "utf8")) as {
  cases: { result: unknown; original_bytes: number }[];
};
const tasks = vectors.cases.find((c) => c.original_bytes > 10_000)?.result as { tasks: { id: string }[]; next_cursor: string };

describe("context_preview", () => {
  it("keeps a result within budget unchanged", () => {
    const result = { next_cursor: "page-2", tasks: [] };
    const preview = buildContextPreview(result, { maxResultContextBytes: 1024 });
    expect(preview).toEqual({
      max_result_context_bytes: 1024,
      original_bytes: 35,
      retained_bytes: 35,
      truncated: false,
      result,
      projection_version: PROJECTION_VERSION,
    });
    expect(preview.result).toBe(result);
    expect(contextPreviewSchema.parse(preview)).toEqual(preview);
  });

  it("keeps a result of exactly the budget unchanged", () => {
    const result = "x".repeat(1022);
    expect(buildContextPreview(result, { maxResultContextBytes: 1024 })).toMatchObject({ original_bytes: 1024, truncated: false });
  });

  it("projects an over-budget result to head, tail, notice and preserved fields, filling the budget", () => {
    const preview = buildContextPreview(tasks, { maxResultContextBytes: 1024 });
    const canonical = canonicalJson(tasks);
    const projected = preview.result as unknown as PreviewResult;
    expect(Object.keys(projected)).toEqual(["notice", "preserved_fields", "preview"]);
    expect(preview.truncated).toBe(true);
    expect(preview.original_bytes).toBe(10546);
    expect(preview.retained_bytes).toBe(compactByteLength(projected));
    expect(preview.retained_bytes).toBeLessThanOrEqual(1024);
    expect(preview.retained_bytes).toBeGreaterThanOrEqual(1024 - 64);
    expect(canonical.startsWith(projected.preview.head)).toBe(true);
    expect(canonical.endsWith(projected.preview.tail)).toBe(true);
    expect(projected.preview.omitted_bytes).toBe(10546 - Buffer.byteLength(projected.preview.head) - Buffer.byteLength(projected.preview.tail));
    expect(projected.notice).toMatch(/10546 bytes exceed max_result_context_bytes=1024/);
    // By value: the cursor, then as many item ids as fit a quarter of the budget, shorter first; the map in canonical order.
    const paths = Object.keys(projected.preserved_fields);
    expect(paths).toContain("next_cursor");
    expect(paths).toEqual([...paths].sort());
    for (let i = 0; i < 10; i++) expect(paths).toContain(`tasks.${i}.id`);
    const kept = paths.filter((p) => p.startsWith("tasks.")).map((p) => Number(p.split(".")[1]));
    expect(Math.max(...kept.filter((i) => i >= 10))).toBe(9 + kept.filter((i) => i >= 10).length); // two-digit ids in index order
    expect(compactByteLength(projected.preserved_fields)).toBeLessThanOrEqual(256);
    expect(projected.preserved_fields["tasks.3.id"]).toBe("t-3");
  });

  it("preserves short status fields at depth ≤ 3 only, with their original values", () => {
    const result = {
      status: "partial",
      data: { next_cursor: null, has_more: true, total: 1200, page: { cursor: "c-9", deeper: { id: "too-deep" } } },
      error: { code: -32000, message: "x".repeat(200) },
      "a.b": { id: "ambiguous" },
      long_id: "y".repeat(129),
      filler: "z".repeat(5000),
    };
    const projected = buildContextPreview(result, { maxResultContextBytes: 2048 }).result as unknown as PreviewResult;
    expect(projected.preserved_fields).toEqual({
      status: "partial",
      "data.has_more": true,
      "data.next_cursor": null,
      "data.total": 1200,
      "error.code": -32000,
      "data.page.cursor": "c-9",
    });
  });

  it("never cuts inside a surrogate pair and counts escapes", () => {
    for (const budget of [1024, 1025, 1026, 1027]) {
      const result = { s: '😀"\\\n'.repeat(2000) };
      const preview = buildContextPreview(result, { maxResultContextBytes: budget });
      const { head, tail } = (preview.result as unknown as PreviewResult).preview;
      expect([head, tail].some((s) => /\p{Cs}/u.test(s))).toBe(false); // no lone surrogate: no pair was split
      expect(preview.retained_bytes).toBeLessThanOrEqual(budget);
      expect(preview.retained_bytes).toBeGreaterThan(budget - 64);
    }
  });

  it("keeps a U+FEFF at the start of the tail (no BOM stripping)", () => {
    const result = { s: "\ufeff".repeat(3000) };
    const projected = buildContextPreview(result, { maxResultContextBytes: 1024 }).result as unknown as PreviewResult;
    const { tail, head, omitted_bytes } = projected.preview;
    expect(canonicalJson(result).endsWith(tail)).toBe(true);
    expect(tail.startsWith("\ufeff")).toBe(true);
    expect(omitted_bytes).toBe(compactByteLength(result) - Buffer.byteLength(head) - Buffer.byteLength(tail));
  });

  it.each(["submission", "reconciliation_required", "opaque_replay"] as const)("keeps a %s result unchanged whatever its size", (kind) => {
    const result = { id: "r-1", blob: "x".repeat(40_000) };
    const preview = buildContextPreview(result, { maxResultContextBytes: 1024, kind });
    expect(preview).toMatchObject({ truncated: false, original_bytes: 40_022, retained_bytes: 40_022 });
    expect(preview.result).toBe(result);
  });

  it("still rejects a non-JSON result of an exempt kind", () => {
    expect(() => buildContextPreview({ x: NaN }, { maxResultContextBytes: 1024, kind: "submission" })).toThrow(/NaN.*at \$\.x/);
  });

  it("is deterministic", () => {
    const a = canonicalJson(buildContextPreview(tasks, { maxResultContextBytes: 2000 }));
    const b = canonicalJson(buildContextPreview(structuredClone(tasks), { maxResultContextBytes: 2000 }));
    expect(a).toBe(b);
  });
});

describe("multimodal results", () => {
  const image = { type: "image", mimeType: "image/png", data: "iVBOR".repeat(4000) };

  it("keeps non-text blocks out of the budget", () => {
    const result = { content: [{ type: "text", text: "caption" }, image] };
    const preview = buildContextPreview(result, { maxResultContextBytes: 1024 });
    expect(preview.truncated).toBe(false);
    expect(preview.retained_bytes).toBeGreaterThan(20_000);
    expect(preview.result).toBe(result);
  });

  it("cuts only text blocks, sharing the budget max-min fairly", () => {
    const long = "长文本 long text ".repeat(400);
    const result = { content: [{ type: "text", text: long }, image, { type: "text", text: "short" }, { type: "text", text: long + "!" }], isError: false };
    const preview = buildContextPreview(result, { maxResultContextBytes: 2048 });
    const content = (preview.result as { content: { type: string; text?: string }[] }).content;
    expect(preview.truncated).toBe(true);
    expect(content[1]).toBe(image);
    expect(content[2]?.text).toBe("short");
    const budgeted = compactByteLength({ ...(preview.result as object), content: content.filter((b) => b.type === "text") });
    expect(budgeted).toBeLessThanOrEqual(2048);
    expect(budgeted).toBeGreaterThan(2048 - 64);
    expect(preview.retained_bytes).toBe(compactByteLength(preview.result));
    for (const [i, original] of [
      [0, long],
      [3, long + "!"],
    ] as const) {
      const cut = content[i]?.text as string;
      expect(cut).toContain("max_result_context_bytes=2048]");
      const { head, omitted, tail } = splitCutText(cut);
      expect(original.startsWith(head) && original.endsWith(tail)).toBe(true);
      expect(omitted).toBe(Buffer.byteLength(original) - Buffer.byteLength(head) - Buffer.byteLength(tail));
      expect(Math.abs(compactByteLength(content[0]) - compactByteLength(content[3]))).toBeLessThan(16);
    }
  });

  it("projects the whole result when its bulk is not in text blocks", () => {
    const result = { content: [{ type: "text", text: "see structuredContent" }], structuredContent: { rows: "r".repeat(5000) } };
    const preview = buildContextPreview(result, { maxResultContextBytes: 1024 });
    expect(Object.keys(preview.result as object)).toEqual(["notice", "preserved_fields", "preview"]);
    expect(preview.retained_bytes).toBeLessThanOrEqual(1024);
  });
});
