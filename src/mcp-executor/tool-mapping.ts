import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { BindingIdSchema, ToolNameSchema } from "../config/ids.js";
import type { Binding } from "../config/schemas.js";

export type ToolKind = Binding["tool_kind"];

/** How an MCP server's tools become toolgate tools; the executor and `mcp import` share it. */
export const ToolMappingOptions = z.strictObject({
  /** Binding of the write tools (and of every tool without annotations). */
  binding: BindingIdSchema,
  /** Binding of the read tools; default `<binding>-read`. A binding has one kind, so reads need their own. */
  readBinding: BindingIdSchema.optional(),
  /** MCP tool names forced to read / write, whatever their annotations say. */
  read: z.array(z.string()).default([]),
  write: z.array(z.string()).default([]),
  /** Toolgate name = `<prefix>.<MCP name>`, to keep several servers apart in one toolset. */
  prefix: z
    .string()
    .regex(/^[A-Za-z0-9_-]+$/, "a prefix is one name segment: A-Z a-z 0-9 _ -")
    .optional(),
});
export type ToolMappingOptions = z.input<typeof ToolMappingOptions>;

/** One MCP tool as toolgate serves it. */
export interface MappedTool {
  /** The toolgate tool name (with the prefix). */
  name: string;
  /** The name the MCP server knows it by. */
  mcpName: string;
  kind: ToolKind;
  /** Why it has that kind: the annotation, a flag, or the missing annotation. */
  kindFrom: "readOnlyHint" | "flag" | "default";
  bindingId: string;
  tool: Tool;
}

/** A mapping the server's tools contradict (an unknown name in a flag, a name toolgate cannot use). */
export class ToolMappingError extends Error {
  override readonly name = "ToolMappingError";
}

/**
 * Read or write from the MCP annotations: a read is a tool that says `readOnlyHint: true` and not
 * `destructiveHint: true` (a contradiction resolves to the safe side). No annotations: write. A write
 * stays a write whatever `idempotentHint` says: toolgate never runs a write twice on its own.
 */
export function kindFromAnnotations(tool: Tool): ToolKind {
  const a = tool.annotations;
  return a?.readOnlyHint === true && a.destructiveHint !== true ? "read" : "write";
}

/**
 * Maps every tool of the server. Tools that only run as MCP tasks (`execution.taskSupport:
 * "required"`) are left out and listed in `skipped`.
 */
export function mapTools(tools: readonly Tool[], input: ToolMappingOptions): { tools: MappedTool[]; skipped: string[] } {
  const options = ToolMappingOptions.parse(input);
  const known = new Set(tools.map((t) => t.name));
  for (const name of [...options.read, ...options.write]) {
    if (!known.has(name)) throw new ToolMappingError(`--read/--write name '${name}' is not a tool of this MCP server (it has: ${[...known].join(", ")})`);
  }
  const both = options.read.find((name) => options.write.includes(name));
  if (both) throw new ToolMappingError(`tool '${both}' is given both as --read and --write`);
  const readBinding = options.readBinding ?? `${options.binding}-read`;
  const mapped: MappedTool[] = [];
  const skipped: string[] = [];
  for (const tool of tools) {
    if (tool.execution?.taskSupport === "required") {
      skipped.push(tool.name);
      continue;
    }
    const name = options.prefix ? `${options.prefix}.${tool.name}` : tool.name;
    const valid = ToolNameSchema.safeParse(name);
    if (!valid.success)
      throw new ToolMappingError(`MCP tool '${tool.name}' cannot be a toolgate tool name ('${name}': ${valid.error.issues.map((i) => i.message).join("; ")})`);
    const flagged: ToolKind | undefined = options.read.includes(tool.name) ? "read" : options.write.includes(tool.name) ? "write" : undefined;
    const kind = flagged ?? kindFromAnnotations(tool);
    const kindFrom = flagged ? "flag" : tool.annotations?.readOnlyHint === undefined ? "default" : "readOnlyHint";
    mapped.push({ name, mcpName: tool.name, kind, kindFrom, bindingId: kind === "read" ? readBinding : options.binding, tool });
  }
  return { tools: mapped, skipped };
}
