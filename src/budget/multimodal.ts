/**
 * Projection of a multimodal (MCP-style) result: an object whose `content` is a non-empty array of blocks
 * with a string `type`. Only text blocks (`type: "text"` with a string `text`) are cut; every other block
 * (image, audio, resource, ...) is kept as it is and does not use the budget.
 *
 * Rules:
 * - the budgeted size is the compact JSON of the result with its non-text blocks left out; other members
 *   (`isError`, `structuredContent`, `_meta`, a text block's other fields) are kept and count;
 * - if that part without the texts takes more than half the budget, the texts are not where the bytes are:
 *   the caller projects the whole result as any other (returns undefined);
 * - the texts share what is left max-min fairly: in order of escaped size (then position), a text keeps all
 *   of itself when it fits an equal share of the remainder, otherwise it is cut to that share; what a cut
 *   leaves unused flows on to the larger texts;
 * - a cut text is `head + notice + tail`, the notice saying how many UTF-8 bytes were omitted; its newlines
 *   keep a lone surrogate at the end of head or start of tail from pairing with anything.
 */
import { compactByteLength } from "./canonical-json.js";
import { takeHead, takeTail } from "./head-tail.js";
import type { Projection } from "./projection.js";

interface ContentBlock {
  readonly type: string;
  readonly [key: string]: unknown;
}
interface TextBlock extends ContentBlock {
  readonly type: "text";
  readonly text: string;
}
export interface MultimodalResult {
  readonly content: readonly ContentBlock[];
  readonly [key: string]: unknown;
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const isTextBlock = (b: ContentBlock): b is TextBlock => b.type === "text" && typeof b.text === "string";

export function isMultimodal(result: unknown): result is MultimodalResult {
  if (!isRecord(result) || !Array.isArray(result.content) || result.content.length === 0) return false;
  return result.content.every((b) => isRecord(b) && typeof b.type === "string");
}

/** Escaped size of a string's contents inside a JSON string literal. */
const textCost = (s: string): number => compactByteLength(s) - 2;

const textNotice = (omittedBytes: number, budget: number): string =>
  `\n[toolgate: ${omittedBytes} bytes of this text omitted, max_result_context_bytes=${budget}]\n`;

/** A text cut to `allowance` escaped bytes, notice included (the notice alone when nothing else fits). */
function cutText(text: string, allowance: number, budget: number): { text: string; cost: number } {
  const total = Buffer.byteLength(text, "utf8"); // a lone surrogate counts 3, as in head-tail.ts
  const room = Math.max(0, allowance - textCost(textNotice(total, budget)));
  const head = takeHead(text, Math.floor(room / 2));
  const tail = takeTail(text, room - head.cost, head.index);
  const notice = textNotice(total - head.utf8 - tail.utf8, budget);
  return { text: text.slice(0, head.index) + notice + text.slice(tail.index), cost: head.cost + textCost(notice) + tail.cost };
}

export function projectMultimodal(result: MultimodalResult, originalBytes: number, budget: number): Projection | undefined {
  const blocks = result.content;
  const texts = blocks.flatMap((b, i) => (isTextBlock(b) ? [{ index: i, text: b.text, cost: textCost(b.text) }] : []));
  const budgeted = compactByteLength({ ...result, content: blocks.filter(isTextBlock) });
  if (budgeted <= budget) return { result, truncated: false, originalBytes, retainedBytes: originalBytes };
  const textTotal = texts.reduce((sum, t) => sum + t.cost, 0);
  const frame = budgeted - textTotal;
  if (frame > budget / 2) return undefined;

  let available = budget - frame;
  let remaining = texts.length;
  let retainedBytes = originalBytes - textTotal;
  const replaced = new Map<number, string>();
  for (const t of [...texts].sort((a, b) => a.cost - b.cost || a.index - b.index)) {
    const share = Math.floor(available / remaining--);
    if (t.cost <= share) {
      available -= t.cost;
      retainedBytes += t.cost;
      continue;
    }
    const cut = cutText(t.text, share, budget);
    replaced.set(t.index, cut.text);
    available -= cut.cost;
    retainedBytes += cut.cost;
  }
  const content = blocks.map((b, i) => {
    const text = replaced.get(i);
    return text === undefined ? b : { ...b, text };
  });
  return { result: { ...result, content }, truncated: true, originalBytes, retainedBytes };
}
