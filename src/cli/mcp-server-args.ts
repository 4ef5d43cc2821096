import { parseArgs, type ParseArgsConfig } from "node:util";
import type { McpServerTarget } from "../mcp-executor/server-target.js";
import type { ToolMappingOptions } from "../mcp-executor/tool-mapping.js";
import { UsageError } from "./command.js";

/** The options `mcp-executor` and `mcp import` share: which MCP server, and how its tools map. */
export const mcpServerOptions = {
  scope: { type: "string" },
  binding: { type: "string" },
  "read-binding": { type: "string" },
  read: { type: "string", multiple: true },
  write: { type: "string", multiple: true },
  prefix: { type: "string" },
  url: { type: "string" },
  header: { type: "string", multiple: true },
  env: { type: "string", multiple: true },
  cwd: { type: "string" },
} as const satisfies ParseArgsConfig["options"];

export const mcpServerUsage = `  --scope S            executor scope the bindings are registered in (required)
  --binding B          binding of the write tools (required)
  --read-binding R     binding of the read tools (default: B-read); a binding has one kind
  --read TOOL          serve this MCP tool as a read, whatever its annotations say (repeatable)
  --write TOOL         serve this MCP tool as a write (repeatable)
  --prefix P           toolgate names are P.<MCP name> (keeps several servers apart in one toolset)
  -- COMMAND [ARGS]    the stdio MCP server to start, e.g. -- npx -y @modelcontextprotocol/server-memory
  --url URL            or: a Streamable HTTP MCP server, e.g. --url http://127.0.0.1:3001/mcp
  --header 'N: V'      HTTP header for --url (repeatable), e.g. an Authorization header
  --env NAME[=VALUE]   environment variable for the stdio server (repeatable): NAME alone passes this
                       process's value; the server otherwise gets only PATH, HOME and the like
  --cwd DIR            working directory of the stdio server

Kinds: an MCP tool with readOnlyHint: true (and not destructiveHint: true) is a read; every other
tool, one without annotations included, is a write (the safe side).`;

/**
 * Splits `toolgate mcp-… [options] -- command args`: what follows the first `--` is the server's
 * command line, never parsed as options.
 */
export function splitServerCommand(argv: readonly string[]): { options: string[]; command: string[] } {
  const at = argv.indexOf("--");
  return at < 0 ? { options: [...argv], command: [] } : { options: argv.slice(0, at), command: argv.slice(at + 1) };
}

type Values = ReturnType<typeof parseArgs<{ options: typeof mcpServerOptions; strict: true }>>["values"];

/** The MCP server to start or reach, from `-- command` or `--url`. */
export function serverTarget(values: Values, command: readonly string[]): McpServerTarget {
  if (command.length > 0 === (values.url !== undefined))
    throw new UsageError("name the MCP server: either -- COMMAND [ARGS] (stdio) or --url URL (Streamable HTTP), not both");
  if (values.url !== undefined) {
    if (values.env || values.cwd) throw new UsageError("--env and --cwd are for a stdio server (-- COMMAND), not --url");
    return { url: values.url, headers: Object.fromEntries((values.header ?? []).map(header)) };
  }
  if (values.header) throw new UsageError("--header is for --url, not a stdio server");
  const env = Object.fromEntries((values.env ?? []).map(envEntry));
  return { command: command[0]!, args: command.slice(1), env, ...(values.cwd ? { cwd: values.cwd } : {}) };
}

/** `--scope`, `--binding` and the kind flags. */
export function toolMapping(values: Values): ToolMappingOptions & { scope: string } {
  if (!values.scope) throw new UsageError("--scope is required");
  if (!values.binding) throw new UsageError("--binding is required (the binding of the write tools)");
  return {
    scope: values.scope,
    binding: values.binding,
    ...(values["read-binding"] ? { readBinding: values["read-binding"] } : {}),
    read: values.read ?? [],
    write: values.write ?? [],
    ...(values.prefix ? { prefix: values.prefix } : {}),
  };
}

function header(text: string): [string, string] {
  const at = text.indexOf(":");
  if (at <= 0) throw new UsageError(`--header '${text}' is not 'Name: value'`);
  return [text.slice(0, at).trim(), text.slice(at + 1).trim()];
}

function envEntry(text: string): [string, string] {
  const at = text.indexOf("=");
  if (at > 0) return [text.slice(0, at), text.slice(at + 1)];
  const value = process.env[text];
  if (value === undefined) throw new UsageError(`--env ${text}: this process has no ${text} to pass on (or give --env ${text}=VALUE)`);
  return [text, value];
}
