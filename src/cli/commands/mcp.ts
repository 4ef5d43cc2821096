import { parseArgs } from "node:util";
import { createLogger } from "../../log/logger.js";
import { UsageError, type Command } from "../command.js";
import { mcpServerOptions, mcpServerUsage, serverTarget, splitServerCommand, toolMapping } from "../mcp-server-args.js";

const usage = `Usage: toolgate mcp import --scope S --binding B --toolset T [options] -- COMMAND [ARGS...]
       toolgate mcp import --scope S --binding B --toolset T [options] --url URL

Reads an MCP server's tools/list and prints, as JSON, the bindings its tools need (one per kind)
and a toolset version of all its tools: name, description, input_schema, output_schema (the MCP
tool result), max_result_context_bytes, binding. With --publish it registers the bindings and
publishes the version through the gateway's HTTP API (immutable like any other version).
'toolgate mcp-executor' with the same --scope, --binding, --read-binding, --read, --write and
--prefix serves exactly these tools.

${mcpServerUsage}

  --toolset T                      toolset id (required)
  --version V                      version label (default v1)
  --max-result-context-bytes N     every tool's budget (default 16384)
  --publish                        register and publish instead of only printing
  --gateway URL                    gateway for --publish (default: TOOLGATE_URL); the API key
                                   comes from TOOLGATE_API_KEY (configuration:write)`;

export const mcpCommand: Command = {
  name: "mcp",
  summary: "MCP servers: 'mcp import' turns an MCP server's tools into a toolset version",
  usage,
  async run(argv) {
    const [sub, ...rest] = argv;
    if (sub !== "import") throw new UsageError(sub === undefined ? "name a sub-command: import" : `unknown sub-command '${sub}' (known: import)`);
    const { options, command } = splitServerCommand(rest);
    const { values } = parseArgs({
      args: options,
      strict: true,
      options: {
        ...mcpServerOptions,
        toolset: { type: "string" },
        version: { type: "string", default: "v1" },
        "max-result-context-bytes": { type: "string" },
        publish: { type: "boolean", default: false },
        gateway: { type: "string" },
      },
    });
    const { scope, ...mapping } = toolMapping(values);
    const server = serverTarget(values, command);
    if (!values.toolset) throw new UsageError("--toolset is required");
    const gateway = values.publish ? gatewayTarget(values.gateway) : undefined;
    const logger = createLogger({ name: "toolgate-mcp-import", level: process.env.LOG_LEVEL ?? "warn" });
    // Loaded here, so that the other commands do not load the MCP SDK.
    const [{ McpConnection }, { publishToolset }, { mapTools }, { importedToolset }] = await Promise.all([
      import("../../mcp-executor/connection.js"),
      import("../../mcp-executor/publish.js"),
      import("../../mcp-executor/tool-mapping.js"),
      import("../../mcp-executor/toolset.js"),
    ]);
    process.stderr.write("reading the MCP server's tools...\n");
    const connection = await McpConnection.open({ target: server, logger });
    try {
      const { tools, skipped } = mapTools(connection.tools, mapping);
      if (skipped.length > 0) process.stderr.write(`left out (they run only as MCP tasks): ${skipped.join(", ")}\n`);
      const max = values["max-result-context-bytes"];
      const imported = importedToolset(tools, {
        toolset: values.toolset,
        version: values.version,
        scope,
        ...(max ? { maxResultContextBytes: Number(max) } : {}),
      });
      for (const t of tools)
        process.stderr.write(
          `  ${t.name}: ${t.kind} (${t.kindFrom === "default" ? "no annotations: write" : t.kindFrom === "flag" ? "--read/--write" : "readOnlyHint"}) on ${t.bindingId}\n`,
        );
      if (!gateway) {
        process.stdout.write(JSON.stringify(imported, null, 2) + "\n");
        return 0;
      }
      const published = await publishToolset(gateway, imported);
      process.stderr.write(`published toolset ${published.toolset} version ${published.version} (${published.tools.length} tools)\n`);
      process.stdout.write(JSON.stringify({ bindings: imported.bindings, published }, null, 2) + "\n");
      return 0;
    } finally {
      await connection.close();
    }
  },
};

function gatewayTarget(url: string | undefined): { baseUrl: string; apiKey: string } {
  const baseUrl = url ?? process.env.TOOLGATE_URL;
  if (!baseUrl) throw new UsageError("--publish needs the gateway: pass --gateway URL or set TOOLGATE_URL");
  const apiKey = process.env.TOOLGATE_API_KEY;
  if (!apiKey) throw new UsageError("--publish needs an API key with configuration:write in TOOLGATE_API_KEY");
  return { baseUrl, apiKey };
}
