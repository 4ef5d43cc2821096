import type { z } from "zod";
import type { ErrorDetail } from "../errors/toolgate-error.js";
import { isRemovedField, REMOVED_TOOL_FIELDS } from "../config/removed-fields.js";

/** `["tools", 0, "max_result_context_bytes"]` -> `tools[0].max_result_context_bytes` (root: ""). */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const seg of path) {
    if (typeof seg === "number") out += `[${seg}]`;
    else out += out === "" ? String(seg) : `.${String(seg)}`;
  }
  return out;
}

type Def = { type: string; innerType?: z.ZodType; in?: z.ZodType; shape?: Record<string, z.ZodType>; element?: z.ZodType; valueType?: z.ZodType };
const WRAPPERS = new Set(["optional", "nullable", "default", "prefault", "readonly", "catch", "nonoptional"]);

function unwrap(schema: z.ZodType | undefined): z.ZodType | undefined {
  let s = schema;
  for (let def = s?.def as Def | undefined; def; def = s?.def as Def | undefined) {
    if (WRAPPERS.has(def.type)) s = def.innerType;
    else if (def.type === "pipe") s = def.in;
    else break;
  }
  return s;
}

/** The sub-schema at `path`, to tell a caller what is allowed there. */
function schemaAt(root: z.ZodType, path: readonly PropertyKey[]): z.ZodType | undefined {
  let s = unwrap(root);
  for (const seg of path) {
    const def = s?.def as Def | undefined;
    if (def?.type === "object") s = unwrap(def.shape?.[String(seg)]);
    else if (def?.type === "array") s = unwrap(def.element);
    else if (def?.type === "record") s = unwrap(def.valueType);
    else return undefined;
  }
  return s;
}

function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let v = input;
  for (const seg of path) v = typeof v === "object" && v !== null ? (v as Record<PropertyKey, unknown>)[seg] : undefined;
  return v;
}

function numericRange(schema: z.ZodType | undefined): string | undefined {
  const n = schema as unknown as { minValue?: number | null; maxValue?: number | null } | undefined;
  if (typeof n?.minValue === "number" && typeof n.maxValue === "number" && Number.isFinite(n.minValue) && Number.isFinite(n.maxValue))
    return `${n.minValue}..${n.maxValue}`;
  return undefined;
}

function objectKeys(schema: z.ZodType | undefined): string | undefined {
  const def = schema?.def as Def | undefined;
  return def?.type === "object" && def.shape ? Object.keys(def.shape).join(", ") : undefined;
}

/**
 * Turns zod issues into error details: one per problem, each with a dotted path, a stable code, a
 * message that says what to do, and `allowed` where the schema knows it. An unknown key becomes its
 * own detail (`unknown_field`, or `removed_field` for the fields the byte budget replaced).
 */
export function zodDetails(error: z.ZodError, schema: z.ZodType, input: unknown, prefix: readonly PropertyKey[] = []): ErrorDetail[] {
  const details: ErrorDetail[] = [];
  for (const issue of error.issues) {
    const path = [...prefix, ...issue.path];
    switch (issue.code) {
      case "unrecognized_keys":
        for (const key of issue.keys) {
          const allowed = objectKeys(schemaAt(schema, issue.path));
          details.push(
            isRemovedField(key)
              ? { path: formatPath([...path, key]), code: "removed_field", message: REMOVED_TOOL_FIELDS[key] ?? key, allowed: "max_result_context_bytes" }
              : { path: formatPath([...path, key]), code: "unknown_field", message: `unknown field '${key}'; remove it`, ...(allowed ? { allowed } : {}) },
          );
        }
        break;
      case "invalid_type": {
        const range = numericRange(schemaAt(schema, issue.path));
        const allowed = range ? `${issue.expected} ${range}` : issue.expected;
        if (valueAt(input, issue.path) === undefined)
          details.push({ path: formatPath(path), code: "required", message: `${formatPath(path) || "the body"} is required (${issue.expected})`, allowed });
        else details.push({ path: formatPath(path), code: "invalid_type", message: issue.message, allowed });
        break;
      }
      case "too_big":
      case "too_small": {
        const allowed = numericRange(schemaAt(schema, issue.path));
        details.push({ path: formatPath(path), code: issue.code, message: issue.message, ...(allowed ? { allowed } : {}) });
        break;
      }
      case "invalid_value":
        details.push({ path: formatPath(path), code: "invalid_value", message: issue.message, allowed: issue.values.map((v) => String(v)).join("|") });
        break;
      default:
        details.push({ path: formatPath(path), code: issue.code, message: issue.message });
    }
  }
  return details;
}

/** A value over a byte bound, as zod names a value over its bound (`too_big`). */
export function tooBigDetail(path: string, bytes: number, allowed: string, what: string): ErrorDetail {
  return { path, code: "too_big", message: `${what} takes ${bytes} bytes`, allowed };
}
