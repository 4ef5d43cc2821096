import { readFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import {
  buildContextPreview,
  canonicalJson,
  CanonicalJsonError,
  DEFAULT_RESULT_CONTEXT_BYTES,
  JsonNumberError,
  maxResultContextBytesSchema,
  parseExactJson,
  resultKindSchema,
} from "../../budget/index.js";
import { UsageError, type Command } from "../command.js";

const CLI_KINDS = ["completed", "submission", "reconciliation_required"] as const;

const usage = `Usage: toolgate measure [--budget N] [--kind KIND] [FILE|-]

Reads one JSON tool result from FILE (or stdin when FILE is - or missing) and prints its context_preview
as one line of canonical compact JSON: the bytes the context budget measures and the projection that
would enter execution history.

Options:
  --budget N   max_result_context_bytes, an integer from 1024 to 32768 (default ${DEFAULT_RESULT_CONTEXT_BYTES})
  --kind KIND  ${CLI_KINDS.join(" | ")} (default completed); the last two are never cut

Exit codes: 0 printed, 2 bad arguments or input that is no JSON result (NaN and Infinity are not JSON).
Duplicate keys in an object keep their last value, as in Python's json module. Numbers are kept as
written: integers exact at any size (up to 4300 digits), floats spelled as Python's repr (1.0, 1e+16).`;

function parseBudget(raw: string | undefined): number {
  if (raw === undefined) return DEFAULT_RESULT_CONTEXT_BYTES;
  const parsed = maxResultContextBytesSchema.safeParse(/^\d+$/.test(raw) ? Number(raw) : raw);
  if (!parsed.success) throw new UsageError(`--budget ${JSON.stringify(raw)}: ${parsed.error.issues[0]?.message}`);
  return parsed.data;
}

function parseKind(raw: string | undefined): (typeof CLI_KINDS)[number] {
  const kind = resultKindSchema.extract(CLI_KINDS).safeParse(raw ?? "completed");
  if (!kind.success) throw new UsageError(`--kind ${JSON.stringify(raw)}: expected one of ${CLI_KINDS.join(", ")}`);
  return kind.data;
}

/** Input that is not one JSON result: reported on stderr, exit 2. */
class InputError extends Error {}

async function readInput(file: string): Promise<Buffer> {
  if (file === "-") {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  }
  try {
    return await readFile(file);
  } catch (err) {
    throw new InputError(`cannot read ${file}: ${(err as Error).message}`);
  }
}

function parseResult(bytes: Buffer, source: string): unknown {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw new InputError(`${source} is not valid UTF-8`);
  }
  try {
    return parseExactJson(text);
  } catch (err) {
    if (err instanceof JsonNumberError || err instanceof RangeError) throw new InputError(`${source}: ${err.message}`);
    throw new InputError(`${source} is not valid JSON (RFC 8259: no NaN, Infinity, comments or trailing commas): ${(err as Error).message}`);
  }
}

export const measureCommand: Command = {
  name: "measure",
  summary: "Print the context_preview (size and projection) of a JSON tool result",
  usage,
  async run(argv) {
    let values: { budget?: string; kind?: string };
    let positionals: string[];
    try {
      ({ values, positionals } = parseArgs({
        args: argv,
        options: { budget: { type: "string" }, kind: { type: "string" } },
        allowPositionals: true,
      }));
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
    if (positionals.length > 1) throw new UsageError(`expected at most one FILE, got ${positionals.length}`);
    const budget = parseBudget(values.budget);
    const kind = parseKind(values.kind);
    const file = positionals[0] ?? "-";
    const source = file === "-" ? "stdin" : file;
    try {
      const result = parseResult(await readInput(file), source);
      const preview = buildContextPreview(result, { maxResultContextBytes: budget, kind });
      process.stdout.write(canonicalJson(preview) + "\n");
      return 0;
    } catch (err) {
      if (!(err instanceof InputError || err instanceof CanonicalJsonError)) throw err;
      process.stderr.write(`toolgate measure: ${err.message}\n`);
      return 2;
    }
  },
};
