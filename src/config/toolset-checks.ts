import type { ErrorDetail } from "../errors/toolgate-error.js";
import { compileJsonSchema } from "../validation/json-schema.js";
import { formatPath } from "../validation/details.js";

/**
 * The rules of a toolset version that a zod schema cannot express: unique tool names, registered
 * bindings, valid JSON Schemas. They read the raw request so that they are reported together with
 * the schema's own errors (a malformed sibling field must not hide a duplicate name).
 */
export async function checkToolsetTools(raw: unknown, bindingExists: (bindingId: string) => Promise<boolean>): Promise<ErrorDetail[]> {
  const tools = (raw as { tools?: unknown } | null)?.tools;
  if (!Array.isArray(tools)) return [];
  const details: ErrorDetail[] = [];
  const seen = new Map<string, number>();
  for (const [i, tool] of tools.entries()) {
    if (typeof tool !== "object" || tool === null) continue;
    const { name, binding_id, input_schema, output_schema } = tool as Record<string, unknown>;
    if (typeof name === "string") {
      const first = seen.get(name);
      if (first !== undefined)
        details.push({
          path: formatPath(["tools", i, "name"]),
          code: "duplicate_name",
          message: `tool name '${name}' is already used by tools[${first}]; names must be unique in a toolset version`,
        });
      else seen.set(name, i);
    }
    if (typeof binding_id === "string" && !(await bindingExists(binding_id)))
      details.push({
        path: formatPath(["tools", i, "binding_id"]),
        code: "unknown_binding",
        message: `binding '${binding_id}' is not registered: register it first with POST /v1/bindings`,
      });
    for (const [field, schema] of [
      ["input_schema", input_schema],
      ["output_schema", output_schema],
    ] as const) {
      if (typeof schema !== "object" || schema === null || Array.isArray(schema)) continue;
      details.push(...compileJsonSchema(schema, ["tools", i, field]).details);
    }
  }
  return details;
}
