import { pino, type DestinationStream, type Logger } from "pino";

export type { Logger };

/**
 * The process logger: pino JSON on stderr (stdout stays free for command output).
 * Secret-bearing fields are redacted wherever they appear.
 */
export function createLogger(options: { level?: string; name?: string; destination?: DestinationStream } = {}): Logger {
  return pino(
    {
      name: options.name ?? "toolgate",
      level: options.level ?? process.env.LOG_LEVEL ?? "info",
      redact: {
        paths: [
          "authorization",
          "*.authorization",
          "headers.authorization",
          "req.headers.authorization",
          "api_key",
          "*.api_key",
          "token",
          "*.token",
          "claim_token",
          "*.claim_token",
          "password",
          "*.password",
        ],
        censor: "[redacted]",
      },
    },
    options.destination ?? pino.destination(2),
  );
}
