/** One `toolgate <name>` sub-command. Each lives in its own module under `commands/`. */
export interface Command {
  readonly name: string;
  /** One line for `toolgate --help`. */
  readonly summary: string;
  /** Full usage text for `toolgate <name> --help`. */
  readonly usage: string;
  /** Runs the command; resolves to the process exit code. */
  run(argv: string[]): Promise<number>;
}

/** A usage error: printed with the command's usage, exit code 2. */
export class UsageError extends Error {
  override readonly name = "UsageError";
}
