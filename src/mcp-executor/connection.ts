import { EventEmitter, once } from "node:events";
import { createInterface } from "node:readline";
import { Readable } from "node:stream";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ErrorCode, McpError, ProgressNotificationSchema, type CallToolResult, type Progress, type Tool } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { errorText, type Logger } from "../runner/logger.js";
import { sleep } from "../runner/wait.js";
import { createTransport, describeTarget, McpServerTarget } from "./server-target.js";

const Restart = z
  .strictObject({
    /** First wait before starting (or reconnecting to) a server that went away; doubles on each failure. */
    initialDelayMs: z.number().int().positive().default(250),
    maxDelayMs: z.number().int().positive().default(30_000),
  })
  .default({ initialDelayMs: 250, maxDelayMs: 30_000 });

export interface McpConnectionOptions {
  target: McpServerTarget;
  logger: Logger;
  restart?: z.input<typeof Restart>;
  /** Called when the server goes away (false) and when it answers again after a restart (true). */
  onReadyChange?(ready: boolean): void;
  /** The name this client gives the MCP server in `initialize`. */
  clientName?: string;
}

/** The SDK's own per-request timeout is replaced by `IdleTimeout` (the longest a timer may wait). */
const NO_SDK_TIMEOUT = 2 ** 31 - 1;

/** Aborts when `ms` pass without a `reset` (an answer or a progress notification). */
class IdleTimeout {
  private readonly controller = new AbortController();
  private timer: NodeJS.Timeout;

  constructor(private readonly ms: number) {
    this.timer = this.arm();
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  reset(): void {
    clearTimeout(this.timer);
    this.timer = this.arm();
  }

  clear(): void {
    clearTimeout(this.timer);
  }

  private arm(): NodeJS.Timeout {
    return setTimeout(() => this.controller.abort(new Error(`no answer and no progress for ${this.ms} ms`)), this.ms);
  }
}

export interface CallOptions {
  signal: AbortSignal;
  onprogress(progress: Progress): void;
  /** No answer (and no progress) for this long: the SDK gives up and sends `notifications/cancelled`. */
  timeoutMs: number;
  onSent?(): void;
}

/** The call never left this process: the signal fired while the server was away. */
export class McpCallNotSent extends Error {
  override readonly name = "McpCallNotSent";
}

/** The server went away while the call was out (process died, HTTP unreachable): its outcome is unknown. */
export class McpConnectionLost extends Error {
  override readonly name = "McpConnectionLost";
}

/**
 * One MCP server seen through the official client SDK: started (stdio) or reached (Streamable HTTP),
 * initialised, its tools listed. When it goes away it is started again with exponential backoff;
 * meanwhile `ready` is false and calls wait for it. Calls that were out when it went away fail with
 * `McpConnectionLost`: the caller decides what an unknown outcome means.
 */
export class McpConnection {
  private readonly target: z.output<typeof McpServerTarget>;
  private readonly restart: z.output<typeof Restart>;
  private readonly events = new EventEmitter();
  private readonly closing = new AbortController();
  private client: Client | undefined;
  private restarting: Promise<void> | undefined;
  private toolList: Tool[] = [];
  private calls = 0;
  private readonly progress = new Map<string | number, (progress: Progress) => void>();

  private constructor(private readonly options: McpConnectionOptions) {
    this.target = McpServerTarget.parse(options.target);
    this.restart = Restart.parse(options.restart);
    this.events.setMaxListeners(0);
  }

  /** Starts or reaches the server once; a failure here is the caller's to report (nothing to restart yet). */
  static async open(options: McpConnectionOptions): Promise<McpConnection> {
    const connection = new McpConnection(options);
    await connection.connect();
    return connection;
  }

  get ready(): boolean {
    return this.client !== undefined;
  }

  /** The server's tools as its last `tools/list` gave them. */
  get tools(): readonly Tool[] {
    return this.toolList;
  }

  /**
   * `tools/call` once the server is there. Waiting for it ends with `McpCallNotSent` when `signal`
   * fires; a connection lost during the call, with `McpConnectionLost`. Anything else (an MCP error
   * answer, a timeout, the signal's cancel) is thrown as the SDK throws it. `onSent` runs as soon as
   * the request is handed to the transport (the SDK writes it synchronously): from then on it may run.
   */
  callTool(name: string, args: Record<string, unknown>, options: CallOptions): Promise<CallToolResult> {
    const client = this.client;
    if (!client) return this.whenReady(options.signal).then(() => this.callTool(name, args, options));
    // Progress goes through our own token and handler: the SDK's `onprogress` loses a notification
    // that arrives together with the result (it dispatches notifications a microtask after responses).
    const progressToken = `toolgate-${++this.calls}`;
    const idle = new IdleTimeout(options.timeoutMs);
    this.progress.set(progressToken, (p) => {
      idle.reset();
      options.onprogress(p);
    });
    const pending = client.callTool({ name, arguments: args, _meta: { progressToken } }, undefined, {
      signal: AbortSignal.any([options.signal, idle.signal]),
      timeout: NO_SDK_TIMEOUT,
    }) as Promise<CallToolResult>;
    options.onSent?.();
    return pending
      .catch((err: unknown) => {
        if (options.signal.aborted || !isConnectionFailure(err)) throw err;
        this.lost(client, err);
        throw new McpConnectionLost(`the MCP server went away during the call: ${errorText(err)}`);
      })
      .finally(() => {
        this.progress.delete(progressToken);
        idle.clear();
      });
  }

  /** Resolves with the client once the server is there; `McpCallNotSent` when `signal` fires first. */
  async whenReady(signal: AbortSignal): Promise<Client> {
    while (!this.client) {
      if (signal.aborted || this.closing.signal.aborted)
        throw new McpCallNotSent("stopped while waiting for the MCP server to come back; the call was never sent");
      await once(this.events, "ready", { signal: AbortSignal.any([signal, this.closing.signal]) }).catch(() => undefined);
    }
    return this.client;
  }

  async close(): Promise<void> {
    this.closing.abort();
    const client = this.client;
    this.client = undefined;
    await client?.close();
    await this.restarting;
  }

  private async connect(): Promise<void> {
    const transport = createTransport(this.target);
    const client = new Client({ name: this.options.clientName ?? "toolgate-mcp-executor", version: "1" });
    if (transport instanceof StdioClientTransport) this.logServerStderr(transport);
    client.onclose = () => this.lost(client, new Error("the connection closed"));
    client.setNotificationHandler(ProgressNotificationSchema, ({ params: { progressToken, ...progress } }) => this.progress.get(progressToken)?.(progress));
    client.onerror = (err) => this.options.logger.debug({ err: errorText(err) }, "MCP transport error");
    try {
      await client.connect(transport);
      this.toolList = await listAllTools(client);
    } catch (err) {
      client.onclose = undefined;
      await client.close().catch(() => undefined);
      throw new Error(`could not start or reach the MCP server (${describeTarget(this.target)}): ${errorText(err)}`, { cause: err });
    }
    if (this.closing.signal.aborted) {
      await client.close();
      return;
    }
    this.client = client;
    const pid = transport instanceof StdioClientTransport ? transport.pid : undefined;
    this.options.logger.info({ server: describeTarget(this.target), server_pid: pid, tools: this.toolList.length }, "MCP server connected");
    this.events.emit("ready");
  }

  /** The server behind `client` went away: not ready until a restart answers. Repeats are ignored. */
  private lost(client: Client, err: unknown): void {
    if (this.client !== client || this.closing.signal.aborted) return;
    this.client = undefined;
    client.onclose = undefined;
    void client.close().catch(() => undefined);
    this.options.logger.warn({ server: describeTarget(this.target), err: errorText(err) }, "MCP server went away; restarting it");
    this.options.onReadyChange?.(false);
    this.restarting = this.restartWithBackoff();
  }

  private async restartWithBackoff(): Promise<void> {
    for (let delay = this.restart.initialDelayMs; ; delay = Math.min(delay * 2, this.restart.maxDelayMs)) {
      await sleep(delay, this.closing.signal);
      if (this.closing.signal.aborted) return;
      try {
        const before = toolNames(this.toolList);
        await this.connect();
        if (toolNames(this.toolList) !== before)
          this.options.logger.warn(
            { before, after: toolNames(this.toolList) },
            "the MCP server's tools changed across its restart; the executor still serves the tools it started with",
          );
        this.options.onReadyChange?.(true);
        return;
      } catch (err) {
        this.options.logger.warn({ err: errorText(err), retry_in_ms: Math.min(delay * 2, this.restart.maxDelayMs) }, "MCP server restart failed");
      }
    }
  }

  private logServerStderr(transport: StdioClientTransport): void {
    const stderr = transport.stderr;
    if (!(stderr instanceof Readable)) return;
    createInterface({ input: stderr }).on("line", (line) => this.options.logger.info({ mcp_server_stderr: line }, "MCP server said"));
  }
}

/** Every page of `tools/list`. */
export async function listAllTools(client: Client): Promise<Tool[]> {
  const tools: Tool[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.listTools(cursor ? { cursor } : undefined);
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor);
  return tools;
}

/**
 * Whether an error says the connection failed rather than the server answering: the SDK's
 * `ConnectionClosed` (a stdio child died), an HTTP error status of the transport (a restarted server
 * no longer knows the session) or a failed fetch (HTTP server unreachable).
 */
function isConnectionFailure(err: unknown): boolean {
  if (err instanceof McpError) return err.code === ErrorCode.ConnectionClosed;
  return err instanceof StreamableHTTPError || (err instanceof TypeError && err.message === "fetch failed");
}

function toolNames(tools: readonly Tool[]): string {
  return tools
    .map((t) => t.name)
    .sort()
    .join(",");
}
