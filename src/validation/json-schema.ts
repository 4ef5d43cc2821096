import { Ajv2020, type ErrorObject, type ValidateFunction } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { toPlainNumbers } from "../budget/index.js";
import type { ErrorDetail } from "../errors/toolgate-error.js";
import { formatPath } from "./details.js";

/**
 * Tool input/output schemas are JSON Schema draft 2020-12 (the dialect of OpenAPI 3.1).
 * `addUsedSchema: false`: two tools may reuse one `$id` without clashing in the shared instance.
 */
const ajv = new Ajv2020({ allErrors: true, strict: false, addUsedSchema: false });
(addFormats as unknown as (a: Ajv2020) => void)(ajv);

/**
 * Validators compiled before, by schema object: a stored toolset is read once and cached as the same
 * object for good (configuration is immutable), so each tool call finds its validator here instead of
 * checking the schema against the meta-schema again. Keyed by identity, not by a digest of the schema,
 * which would cost a canonical encoding per call; weak, so a schema nobody holds any more is forgotten.
 */
const compiled = new WeakMap<object, ValidateFunction>();

/** A JSON pointer `/items/0/id` as path segments, numbers for array indexes. */
function pointerSegments(pointer: string): (string | number)[] {
  if (pointer === "") return [];
  return pointer
    .slice(1)
    .split("/")
    .map((s) => s.replaceAll("~1", "/").replaceAll("~0", "~"))
    .map((s) => (/^(0|[1-9][0-9]*)$/.test(s) ? Number(s) : s));
}

/** Compiles `schema`; a schema that is not valid JSON Schema yields details at `at` instead. */
export function compileJsonSchema(schema: object, at: readonly PropertyKey[]): { validate?: ValidateFunction; details: ErrorDetail[] } {
  const known = compiled.get(schema);
  if (known) return { validate: known, details: [] };
  if (!ajv.validateSchema(schema)) {
    // The meta-schema reports one mistake several ways (enum, type, anyOf): keep the first per place.
    const byPath = new Map<string, ErrorDetail>();
    for (const e of ajv.errors ?? []) {
      const path = formatPath([...at, ...pointerSegments(e.instancePath)]);
      if (!byPath.has(path))
        byPath.set(path, { path, code: "invalid_json_schema", message: `not a valid JSON Schema (draft 2020-12): ${e.message ?? e.keyword}` });
    }
    return { details: [...byPath.values()] };
  }
  try {
    const validate = ajv.compile(schema);
    compiled.set(schema, validate);
    return { validate, details: [] };
  } catch (err) {
    return { details: [{ path: formatPath(at), code: "invalid_json_schema", message: `JSON Schema does not compile: ${(err as Error).message}` }] };
  }
}

function argumentDetail(e: ErrorObject, at: readonly PropertyKey[]): ErrorDetail {
  const path = [...at, ...pointerSegments(e.instancePath)];
  const params = e.params as Record<string, unknown>;
  if (e.keyword === "required")
    return {
      path: formatPath([...path, String(params.missingProperty)]),
      code: "required",
      message: `${String(params.missingProperty)} is required by the tool's input_schema`,
    };
  if (e.keyword === "additionalProperties")
    return { path: formatPath([...path, String(params.additionalProperty)]), code: "additionalProperties", message: "not allowed by the tool's input_schema" };
  const allowed = Array.isArray(params.allowedValues) ? { allowed: params.allowedValues.map((v) => JSON.stringify(v)).join("|") } : {};
  return { path: formatPath(path), code: e.keyword, message: `${e.message ?? e.keyword} (input_schema)`, ...allowed };
}

/**
 * Validates `data` against a compiled schema; each error is a detail under `at` (e.g. `arguments.cursor`).
 * ajv knows only JS numbers: an exact bigint or `1.0` is validated as the nearest number (JSON Schema holds
 * `1.0` an integer too).
 */
export function schemaDetails(validate: ValidateFunction, data: unknown, at: readonly PropertyKey[]): ErrorDetail[] {
  return validate(toPlainNumbers(data)) ? [] : (validate.errors ?? []).map((e) => argumentDetail(e, at));
}
