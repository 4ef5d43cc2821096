/**
 * Projection of a multimodal (MCP-style) result: an object whose `content` is a non-empty array of blocks
 * with a string `type`. Only binary media is exempt from the budget; every other byte counts, and text is
 * cut wherever it sits. By MCP content block type:
 * - `text` with a string `text`: the text is cut; its other members count;
 * - `image`, `audio` with a string `mimeType` and a string `data` (base64): the contents of `data` are exempt
 *   and kept whole; the rest of the block counts;
 * - `resource` whose `resource` has a string `blob`: the contents of `blob` are exempt and kept whole; a
 *   string `text` there is cut like a text block's; `uri`, `mimeType` and the rest count;
 * - `resource_link`, any other type, and any block not of the shapes above count whole and are not cut.
 *
 * Rules:
 * - the budgeted size is the compact JSON of the result with the exempt strings emptied; the rest of the
 *   result (`isError`, `structuredContent`, `_meta`) counts too; within budget the result is unchanged;
 * - if that part without the texts (the frame) takes more than half the budget, the texts are not where
 *   the bytes are: the caller projects the whole result as any other (returns undefined);
 * - the texts share what is left max-min fairly: in order of escaped size (then position), a text keeps all
 *   of itself when it fits an equal share of the remainder, otherwise it is cut to that share; what a cut
 *   leaves unused flows on to the larger texts;
 * - a cut text is `head + notice + tail`, the notice saying how many UTF-8 bytes were omitted; its newlines
 *   keep a lone surrogate at the end of head or start of tail from pairing with anything;
 * - when a share cannot hold even the notice (many texts, small budget), the texts cannot all be cut within
 *   budget: the caller projects the whole result as any other (returns undefined).
 */
import { compactByteLength } from "./canonical-json.js";
import { takeHead, takeTail } from "./head-tail.js";
import type { Projection } from "./projection.js";

type Json = Record<string, unknown>;
export interface MultimodalResult {
  readonly content: readonly Json[];
  readonly [key: string]: unknown;
}

const isRecord = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

export function isMultimodal(result: unknown): result is MultimodalResult {
  if (!isRecord(result) || !Array.isArray(result.content) || result.content.length === 0) return false;
  return result.content.every((b) => isRecord(b) && typeof b.type === "string");
}

const isBinaryMedia = (b: Json): boolean => (b.type === "image" || b.type === "audio") && typeof b.mimeType === "string" && typeof b.data === "string";

/** The block's embedded resource, when it is a `resource` block. */
const resourceOf = (b: Json): Json | undefined => (b.type === "resource" && isRecord(b.resource) ? b.resource : undefined);

/** The block with its exempt binary contents emptied: the form whose bytes count. */
function budgetedBlock(b: Json): Json {
  if (isBinaryMedia(b)) return { ...b, data: "" };
  const resource = resourceOf(b);
  if (resource !== undefined && typeof resource.blob === "string") return { ...b, resource: { ...resource, blob: "" } };
  return b;
}

/** The text of a block that is cut like text, if any. */
function textOf(b: Json): string | undefined {
  if (b.type === "text") return typeof b.text === "string" ? b.text : undefined;
  const resource = resourceOf(b);
  return resource !== undefined && typeof resource.text === "string" ? resource.text : undefined;
}

/** The block with its text replaced. */
function withText(b: Json, text: string): Json {
  const resource = resourceOf(b);
  return b.type === "text" || resource === undefined ? { ...b, text } : { ...b, resource: { ...resource, text } };
}

/** Escaped size of a string's contents inside a JSON string literal. */
const textCost = (s: string): number => compactByteLength(s) - 2;

const textNotice = (omittedBytes: number, budget: number): string =>
  `\n[toolgate: ${omittedBytes} bytes of this text omitted, max_result_context_bytes=${budget}]\n`;

/** A text cut to `allowance` escaped bytes, notice included; undefined when not even the notice fits. */
function cutText(text: string, allowance: number, budget: number): { text: string; cost: number } | undefined {
  const total = Buffer.byteLength(text, "utf8"); // a lone surrogate counts 3, as in head-tail.ts
  const room = allowance - textCost(textNotice(total, budget));
  if (room < 0) return undefined;
  const head = takeHead(text, Math.floor(room / 2));
  const tail = takeTail(text, room - head.cost, head.index);
  const notice = textNotice(total - head.utf8 - tail.utf8, budget);
  return { text: text.slice(0, head.index) + notice + text.slice(tail.index), cost: head.cost + textCost(notice) + tail.cost };
}

/** Budgeted bytes of a multimodal result: its compact JSON with the exempt binary contents emptied. */
function budgetedBytes(result: MultimodalResult, originalBytes: number): number {
  const content = result.content.map(budgetedBlock);
  // Nothing exempt (all text, the common case): the budgeted form is the result, already measured.
  if (content.every((b, i) => b === result.content[i])) return originalBytes;
  return compactByteLength({ ...result, content });
}

export function projectMultimodal(result: MultimodalResult, originalBytes: number, budget: number): Omit<Projection, "unpreserved"> | undefined {
  const blocks = result.content;
  const budgeted = budgetedBytes(result, originalBytes);
  if (budgeted <= budget) return { result, truncated: false, originalBytes, retainedBytes: originalBytes };
  const texts = blocks.flatMap((b, index) => {
    const text = textOf(b);
    return text === undefined ? [] : [{ index, text, cost: textCost(text) }];
  });
  const frame = budgeted - texts.reduce((sum, t) => sum + t.cost, 0);
  if (frame > budget / 2) return undefined;

  let available = budget - frame;
  let remaining = texts.length;
  const replaced = new Map<number, string>();
  for (const t of [...texts].sort((a, b) => a.cost - b.cost || a.index - b.index)) {
    const share = Math.floor(available / remaining--);
    if (t.cost <= share) {
      available -= t.cost;
      continue;
    }
    const cut = cutText(t.text, share, budget);
    if (cut === undefined) return undefined;
    replaced.set(t.index, cut.text);
    available -= cut.cost;
  }
  const content = blocks.map((b, i) => {
    const text = replaced.get(i);
    return text === undefined ? b : withText(b, text);
  });
  const projected = { ...result, content };
  return { result: projected, truncated: true, originalBytes, retainedBytes: compactByteLength(projected) };
}
