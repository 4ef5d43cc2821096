import { createLogger } from "../log/logger.js";

/** What the runner logs through: any pino logger fits (or anything with these four methods). */
export interface Logger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

/**
 * The runner's logger when none is given: pino JSON on stderr, secrets redacted, at `level` (the
 * runner reads no environment: a product maps its own LOG_LEVEL, as the examples do).
 */
export function runnerLogger(level = "info"): Logger {
  return createLogger({ name: "toolgate-runner", level });
}

/** An error's message for a log line (transport errors carry no useful stack). */
export function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
