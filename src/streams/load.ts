import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { DefinitionSchema, definitionLabel, type Definition } from "./definitions.js";
import { kvStreamName } from "./names.js";

/** The package's own `streams/` (two levels up from both `src/streams/` and `dist/streams/`). */
export const defaultStreamsDir = fileURLToPath(new URL("../../streams/", import.meta.url));

/** Raised when `streams/` does not validate; lists every problem with its file. */
export class DefinitionsError extends Error {
  override readonly name = "DefinitionsError";
  constructor(readonly problems: string[]) {
    super(`invalid stream definitions:\n  ${problems.join("\n  ")}`);
  }
}

/**
 * Reads every `*.json` of `dir` (one object per file), validates each, and checks the set as a whole:
 * no object declared twice, and every consumer's stream declared too. Sorted by file name.
 */
export function loadDefinitions(dir: string = defaultStreamsDir): Definition[] {
  const problems: string[] = [];
  const defs: Definition[] = [];
  const files = readdirSync(dir)
    .filter((f) => f.endsWith(".json"))
    .sort();
  for (const file of files) {
    let raw: unknown;
    try {
      raw = JSON.parse(readFileSync(join(dir, file), "utf8"));
    } catch (err) {
      problems.push(`${file}: not valid JSON (${(err as Error).message})`);
      continue;
    }
    const parsed = DefinitionSchema.safeParse(raw);
    if (parsed.success) defs.push(parsed.data);
    else problems.push(...parsed.error.issues.map((i) => `${file}: ${i.path.join(".") || "(root)"}: ${i.message}`));
  }
  problems.push(...checkSet(defs));
  if (problems.length > 0) throw new DefinitionsError(problems);
  return defs;
}

function checkSet(defs: Definition[]): string[] {
  const problems: string[] = [];
  const labels = new Set<string>();
  const streams = new Set<string>();
  for (const def of defs) {
    const label = definitionLabel(def);
    if (labels.has(label)) problems.push(`${label} is declared twice`);
    labels.add(label);
    if (def.kind === "stream") streams.add(def.name);
    if (def.kind === "kv") streams.add(kvStreamName(def.bucket));
  }
  for (const def of defs) {
    if (def.kind === "consumer" && !streams.has(def.stream)) problems.push(`${definitionLabel(def)}: stream ${def.stream} is not declared`);
  }
  return problems;
}

/** Validates definitions given in code (tests, embedders) with the same rules as the files. */
export function parseDefinitions(raw: unknown[]): Definition[] {
  const defs = z.array(DefinitionSchema).parse(raw);
  const problems = checkSet(defs);
  if (problems.length > 0) throw new DefinitionsError(problems);
  return defs;
}
