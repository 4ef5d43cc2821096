import { getDefaultEnvironment, StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { z } from "zod";

/** A stdio MCP server: the command this process starts (and restarts) as its child. */
const StdioTarget = z.strictObject({
  command: z.string().min(1).describe("Executable that starts the MCP server on stdio"),
  args: z.array(z.string()).default([]),
  /**
   * Extra environment of the child. It gets the MCP SDK's safe default set (PATH, HOME...) plus
   * these, never the executor's whole environment (NATS credentials stay out of it).
   */
  env: z.record(z.string(), z.string()).default({}),
  cwd: z.string().optional(),
});

/** A Streamable HTTP MCP server that runs on its own. */
const HttpTarget = z.strictObject({
  url: z.url({ protocol: /^https?$/ }).describe("The MCP endpoint, e.g. http://127.0.0.1:3001/mcp"),
  headers: z.record(z.string(), z.string()).default({}),
});

export const McpServerTarget = z.union([StdioTarget, HttpTarget]);
export type McpServerTarget = z.input<typeof McpServerTarget>;

/** A transport for one connection attempt; a stdio one starts a fresh child process. */
export function createTransport(target: z.output<typeof McpServerTarget>): Transport {
  if ("url" in target) return new StreamableHTTPClientTransport(new URL(target.url), { requestInit: { headers: target.headers } });
  return new StdioClientTransport({
    command: target.command,
    args: target.args,
    env: { ...getDefaultEnvironment(), ...target.env },
    ...(target.cwd ? { cwd: target.cwd } : {}),
    // Piped, so its lines go into this process's JSON log instead of interleaving with it.
    stderr: "pipe",
  });
}

/** How the target is named in logs and errors. */
export function describeTarget(target: z.output<typeof McpServerTarget>): string {
  return "url" in target ? target.url : [target.command, ...target.args].join(" ");
}
