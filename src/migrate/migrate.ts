import type { ConfigStore } from "../config/config-store.js";
import { LEGACY_PREFIX } from "../config/keys.js";
import { checkToolsetTools } from "../config/toolset-checks.js";
import { zodDetails } from "../validation/details.js";
import { convertLegacyToolset, LEGACY_KINDS, type LegacyKind } from "./legacy.js";

/** One legacy configuration object, wherever it was found. */
export interface LegacyObject {
  kind: LegacyKind;
  /** Where it came from, for the report: `file.json toolsets[0]` or `legacy.toolsets.tasks.v1`. */
  source: string;
  raw: unknown;
}

export interface MigrationReport {
  lines: string[];
  created: number;
  unchanged: number;
  /** Objects that could not be migrated (invalid, or a different object already holds the id). */
  failed: number;
}

const KIND_ORDER = Object.keys(LEGACY_KINDS) as LegacyKind[];

/** Legacy objects of an export file: `{"bindings": [...], "toolsets": [...], "agents": [...], "sessions": [...]}`. */
export function legacyObjectsFromExport(exported: unknown, fileLabel: string): { objects: LegacyObject[]; ignored: string[] } {
  if (typeof exported !== "object" || exported === null || Array.isArray(exported))
    throw new Error(`${fileLabel}: expected a JSON object with bindings, toolsets, agents, sessions arrays`);
  const objects: LegacyObject[] = [];
  const ignored: string[] = [];
  for (const [section, entries] of Object.entries(exported)) {
    if (!KIND_ORDER.includes(section as LegacyKind) || !Array.isArray(entries)) {
      ignored.push(section);
      continue;
    }
    entries.forEach((raw, i) => objects.push({ kind: section as LegacyKind, source: `${fileLabel} ${section}[${i}]`, raw }));
  }
  return { objects, ignored };
}

/** Legacy objects stored in the config bucket under `legacy.<key>` (e.g. `legacy.toolsets.tasks.v1`). */
export async function legacyObjectsFromStore(store: ConfigStore): Promise<LegacyObject[]> {
  const objects: LegacyObject[] = [];
  for (const key of await store.keys(`${LEGACY_PREFIX}>`)) {
    const kind = key.slice(LEGACY_PREFIX.length).split(".")[0] as LegacyKind;
    if (!KIND_ORDER.includes(kind)) continue;
    const entry = await store.kv.get(key);
    if (entry?.operation === "PUT") objects.push({ kind, source: key, raw: entry.json() });
  }
  return objects;
}

/**
 * Converts and stores legacy objects under their own ids. Idempotent: an object already stored with
 * the same value is `unchanged`. It only ever creates keys: legacy objects, existing configuration and
 * execution history (other buckets and streams) are never modified or deleted.
 */
export async function migrate(
  store: ConfigStore,
  objects: LegacyObject[],
  options: { dryRun?: boolean; /** Called after each object, for progress output. */ progress?: (done: number, total: number) => void } = {},
): Promise<MigrationReport> {
  const report: MigrationReport = { lines: [], created: 0, unchanged: 0, failed: 0 };
  const bindings = new Set<string>(); // bindings of this run, which a dry run has not stored
  const bindingExists = async (id: string) => bindings.has(id) || (await store.getBinding(id)) !== null;
  const ordered = [...objects].sort((a, b) => KIND_ORDER.indexOf(a.kind) - KIND_ORDER.indexOf(b.kind));
  for (const [i, object] of ordered.entries()) {
    if (i > 0) options.progress?.(i, ordered.length);
    const { value: converted, changes } = object.kind === "toolsets" ? convertLegacyToolset(object.raw) : { value: object.raw, changes: [] };
    const { schema, key } = LEGACY_KINDS[object.kind];
    const parsed = schema.safeParse(converted);
    const problems = parsed.success ? [] : zodDetails(parsed.error, schema, converted);
    if (object.kind === "toolsets") problems.push(...(await checkToolsetTools(converted, bindingExists)));
    if (!parsed.success || problems.length > 0) {
      report.failed++;
      report.lines.push(`${object.source}: not migrated: ${problems.map((p) => `${p.path || "(root)"} ${p.message}`).join("; ")}`);
      continue;
    }
    const target = (key as (v: unknown) => string)(parsed.data);
    if (object.kind === "bindings") bindings.add((parsed.data as { binding_id: string }).binding_id);
    const outcome = options.dryRun ? "would create" : await store.importValue(target, schema as never, parsed.data);
    for (const change of changes) report.lines.push(`${object.source} -> ${target}: ${change}`);
    if (outcome === "unchanged") report.unchanged++;
    else if (outcome === "differs") report.failed++;
    else report.created++;
    report.lines.push(
      `${object.source} -> ${target}: ${outcome === "differs" ? "not migrated: a different object already holds this id (published objects are immutable; resolve by hand)" : outcome === "unchanged" ? "unchanged (already migrated)" : outcome}`,
    );
  }
  if (ordered.length > 0) options.progress?.(ordered.length, ordered.length);
  return report;
}
