import type { CallToolResult, Progress } from "@modelcontextprotocol/sdk/types.js";
import { errorText, runnerLogger, type Logger } from "../runner/logger.js";
import { ToolRunner, type ToolRunnerOptions } from "../runner/runner.js";
import type { ToolContext, ToolDefinition } from "../runner/tools.js";
import { McpConnection, McpConnectionLost, type McpConnectionOptions } from "./connection.js";
import { errorOutcome, resultOutcome } from "./outcome.js";
import type { McpServerTarget } from "./server-target.js";
import { mapTools, type MappedTool, type ToolMappingOptions } from "./tool-mapping.js";

export type McpExecutorOptions = Omit<ToolRunnerOptions, "authorize" | "tools" | "ready"> &
  ToolMappingOptions & {
    /** The MCP server: a command to start on stdio, or a Streamable HTTP URL. */
    server: McpServerTarget;
    /** The product's per-call check (see ToolRunner); default: every grant the gateway issued is allowed. */
    authorize?: ToolRunnerOptions["authorize"];
    /** A call with neither an answer nor progress for this long is cancelled (default 5 minutes). */
    callTimeoutMs?: number;
    /** A read interrupted by the server going away runs again once it is back, at most this often (default 3). */
    readRetries?: number;
    restart?: McpConnectionOptions["restart"];
  };

/**
 * An MCP server served as a toolgate executor: each of its tools is a ToolRunner tool whose handler
 * is `tools/call`, so claims, the digest and authorize checks, the operation key saved before
 * `accepted`, durable receipts, replay and the crash rules are the ToolRunner's. The server is
 * restarted with backoff when it goes away; the runner reports itself not ready meanwhile.
 */
export class McpExecutor {
  private constructor(
    readonly runner: ToolRunner,
    readonly connection: McpConnection,
    /** The tools served, with their kinds and bindings. */
    readonly tools: readonly MappedTool[],
  ) {}

  static async start(options: McpExecutorOptions): Promise<McpExecutor> {
    const logger = options.logger ?? runnerLogger();
    const { server, binding, readBinding, read, write, prefix, authorize, callTimeoutMs = 300_000, readRetries = 3, restart, ...runnerOptions } = options;
    let runner: ToolRunner | undefined;
    const connection = await McpConnection.open({ target: server, logger, ...(restart ? { restart } : {}), onReadyChange: (ready) => runner?.setReady(ready) });
    try {
      const { tools, skipped } = mapTools(connection.tools, { binding, readBinding, read, write, prefix });
      if (skipped.length > 0) logger.warn({ skipped }, "MCP tools that only run as MCP tasks are not served");
      if (tools.length === 0) throw new Error("the MCP server lists no tool this executor can serve");
      const definitions = Object.fromEntries(
        tools.map((tool): [string, ToolDefinition] => [
          tool.name,
          { kind: tool.kind, bindingId: tool.bindingId, handler: (ctx) => callTool(connection, tool, ctx, { timeoutMs: callTimeoutMs, readRetries, logger }) },
        ]),
      );
      runner = await ToolRunner.start({ ...runnerOptions, logger, authorize: authorize ?? (() => true), tools: definitions, ready: connection.ready });
      // A change while the runner started reached no runner yet.
      runner.setReady(connection.ready);
      logger.info({ tools: tools.map((t) => ({ name: t.name, kind: t.kind, binding: t.bindingId })) }, "MCP executor serving");
      return new McpExecutor(runner, connection, tools);
    } catch (err) {
      await runner?.close({ deadlineMs: 0 }).catch(() => undefined);
      await connection.close();
      throw err;
    }
  }

  /** Closes the runner (its shutdown rules: running writes are reported, the outbox flushed), then the server. */
  async close(options: { deadlineMs?: number } = {}): Promise<void> {
    await this.runner.close(options);
    await this.connection.close();
  }
}

/**
 * The handler of one MCP tool: `tools/call` with the grant's arguments, MCP progress as progress
 * receipts, the runner's cancel signal as the SDK's (which sends `notifications/cancelled`).
 */
async function callTool(
  connection: McpConnection,
  tool: MappedTool,
  ctx: ToolContext,
  options: { timeoutMs: number; readRetries: number; logger: Logger },
): Promise<unknown> {
  const args = (ctx.arguments ?? {}) as Record<string, unknown>;
  const onprogress = (p: Progress) => {
    ctx
      .progress({ progress: p.progress, ...(p.total === undefined ? {} : { total: p.total }), ...(p.message === undefined ? {} : { message: p.message }) })
      .catch((err: unknown) => {
        options.logger.warn({ assignment_id: ctx.grant.assignment_id, err: errorText(err) }, "MCP progress not reported");
      });
  };
  for (let attempt = 0; ; attempt++) {
    const onSent = () => options.logger.debug({ assignment_id: ctx.grant.assignment_id, tool: tool.mcpName, kind: tool.kind, attempt }, "tools/call sent");
    let result: CallToolResult;
    try {
      result = await connection.callTool(tool.mcpName, args, { signal: ctx.signal, onprogress, timeoutMs: options.timeoutMs, onSent });
    } catch (err) {
      // A read has no side effects by contract: once the server is back, it simply runs again.
      if (err instanceof McpConnectionLost && tool.kind === "read" && attempt < options.readRetries) continue;
      throw errorOutcome(err, tool.kind, ctx.signal);
    }
    return resultOutcome(result);
  }
}
