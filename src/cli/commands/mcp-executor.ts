import { parseArgs } from "node:util";
import { createLogger } from "../../log/logger.js";
import { natsClientEnv } from "../../nats/client-options.js";
import { natsServers } from "../../nats/servers.js";
import { UsageError, type Command } from "../command.js";
import { whenLauncherGone } from "../launcher.js";
import { mcpServerOptions, mcpServerUsage, serverTarget, splitServerCommand, toolMapping } from "../mcp-server-args.js";

const usage = `Usage: toolgate mcp-executor --scope S --binding B [options] -- COMMAND [ARGS...]
       toolgate mcp-executor --scope S --binding B [options] --url URL

Serves an MCP server's tools as a toolgate executor: starts the server (or reaches it over
Streamable HTTP) with the official MCP client, claims the calls of its tools, and runs each as
tools/call behind the ToolRunner's guarantees (grant checks, accepted before the call, durable
receipts, replay without a second call, a write interrupted mid-call -> reconciliation_required).
A server that dies is restarted with backoff; meanwhile the executor reports itself not ready.

${mcpServerUsage}

  --executor-id ID     stable executor id (default: mcp-B); the store belongs to it
  --store FILE         SQLite store of claims and receipts (default: ./ID.db); keep it across restarts
  --server URL         NATS server(s) (default: NATS_URL; credentials and TLS from NATS_NKEY_SEED_FILE, NATS_TLS_*)
  --call-timeout-ms N  a call with neither answer nor progress for N ms is cancelled (default 300000)
  --max-concurrent N   calls held at once (default 16)

Every grant the gateway issued is authorised; embed McpExecutor (toolgate/mcp) for a per-call policy.
Logs are pino JSON on stderr (LOG_LEVEL). SIGTERM/SIGINT (or, started through npm or npx, the npm
process that started it gone): stop claiming, let running calls finish for 10 s, report the rest,
exit 0. Docs: docs/mcp.md.`;

export const mcpExecutorCommand: Command = {
  name: "mcp-executor",
  summary: "Serve an MCP server's tools as a durable toolgate executor",
  usage,
  async run(argv) {
    const { options, command } = splitServerCommand(argv);
    const { values } = parseArgs({
      args: options,
      strict: true,
      options: {
        ...mcpServerOptions,
        "executor-id": { type: "string" },
        store: { type: "string" },
        server: { type: "string" },
        "call-timeout-ms": { type: "string" },
        "max-concurrent": { type: "string" },
      },
    });
    const mapping = toolMapping(values);
    const server = serverTarget(values, command);
    const natsUrl = values.server ?? process.env.NATS_URL;
    if (!natsUrl) throw new UsageError("no NATS server: pass --server URL or set NATS_URL");
    const executorId = values["executor-id"] ?? `mcp-${mapping.binding}`;
    const logger = createLogger({ name: "toolgate-mcp-executor" });
    // Loaded here, so that the other commands do not load the MCP SDK.
    const { McpExecutor } = await import("../../mcp-executor/executor.js");
    const executor = await McpExecutor.start({
      ...mapping,
      server,
      natsUrl: natsServers(natsUrl),
      credentials: natsClientEnv(),
      executorId,
      store: values.store ?? `${executorId}.db`,
      logger,
      ...(values["call-timeout-ms"] ? { callTimeoutMs: positive(values["call-timeout-ms"], "--call-timeout-ms") } : {}),
      ...(values["max-concurrent"] ? { maxConcurrent: positive(values["max-concurrent"], "--max-concurrent") } : {}),
    });
    await new Promise<void>((resolve) => {
      for (const signal of ["SIGTERM", "SIGINT"] as const) process.once(signal, () => resolve());
      whenLauncherGone(() => {
        logger.warn({}, "the npm process that started the executor is gone (npm passes no SIGTERM on): stopping as on SIGTERM");
        resolve();
      });
    });
    logger.info({}, "stopping: finishing running calls");
    await executor.close({ deadlineMs: 10_000 });
    return 0;
  },
};

function positive(text: string, flag: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n <= 0) throw new UsageError(`${flag} must be a positive integer, not '${text}'`);
  return n;
}
