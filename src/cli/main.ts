import { readFileSync } from "node:fs";
import { NatsEnvError } from "../nats/connect.js";
import { UsageError, type Command } from "./command.js";
import { checkHistoryCommand } from "./commands/check-history.js";
import { mcpExecutorCommand } from "./commands/mcp-executor.js";
import { mcpCommand } from "./commands/mcp.js";
import { measureCommand } from "./commands/measure.js";
import { migrateCommand } from "./commands/migrate.js";
import { natsConfigCommand } from "./commands/nats-config.js";
import { nkeyCommand } from "./commands/nkey.js";
import { serveCommand } from "./commands/serve.js";
import { statusCommand } from "./commands/status.js";
import { streamsCommand } from "./commands/streams.js";

/** Every `toolgate` sub-command; a test checks each has usage text and answers `--help`. */
export const commands: readonly Command[] = [
  serveCommand,
  statusCommand,
  streamsCommand,
  migrateCommand,
  measureCommand,
  natsConfigCommand,
  nkeyCommand,
  checkHistoryCommand,
  mcpExecutorCommand,
  mcpCommand,
];

function overview(): string {
  const width = Math.max(...commands.map((c) => c.name.length), 4);
  const lines = commands.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`);
  return [
    "Usage: toolgate <command> [options]",
    "",
    "Commands:",
    ...lines,
    "",
    "Run 'toolgate <command> --help' for a command's options, 'toolgate --version' for the version.",
  ].join("\n");
}

/** The package's version (package.json sits two levels up from both src/cli/ and dist/cli/). */
function version(): string {
  return (JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }).version;
}

/** In a pipe whose reader has gone (`toolgate measure big.json | head -c 100`): stop quietly with 0, like other unix tools. */
function exitQuietlyWhenPipeCloses(): void {
  process.stdout.on("error", (err: NodeJS.ErrnoException) => {
    if (err.code === "EPIPE") process.exit(0);
    throw err;
  });
}

/** Entry point of the `toolgate` binary. */
export async function main(argv: string[]): Promise<void> {
  exitQuietlyWhenPipeCloses();
  const [name, ...rest] = argv;
  if (name === "--version" || name === "-V" || name === "version") {
    process.stdout.write(`toolgate ${version()}\n`);
    return;
  }
  if (name === undefined || name === "--help" || name === "-h" || name === "help") {
    process.stdout.write(overview() + "\n");
    process.exitCode = name === undefined ? 2 : 0;
    return;
  }
  const command = commands.find((c) => c.name === name);
  if (!command) {
    process.stderr.write(`toolgate: unknown command '${name}'\n\n${overview()}\n`);
    process.exitCode = 2;
    return;
  }
  // After `--` come another program's arguments (`mcp-executor -- server --help`), not ours.
  const own = rest.includes("--") ? rest.slice(0, rest.indexOf("--")) : rest;
  if (own.includes("--help") || own.includes("-h")) {
    process.stdout.write(command.usage + "\n");
    return;
  }
  try {
    process.exitCode = await command.run(rest);
  } catch (err) {
    if (err instanceof UsageError || err instanceof NatsEnvError) {
      process.stderr.write(`toolgate ${name}: ${err.message}\n\n${command.usage}\n`);
      process.exitCode = 2;
      return;
    }
    process.stderr.write(`toolgate ${name}: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  }
}
