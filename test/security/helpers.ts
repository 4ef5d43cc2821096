import { Writable } from "node:stream";
import { createGateway, type Gateway } from "../../src/gateway/gateway.js";
import { GatewayEnvSchema } from "../../src/gateway/config.js";
import { createLogger } from "../../src/log/logger.js";
import { ADMIN_KEY } from "../helpers/execution-gateway.js";

/** A gateway whose every log line (JSON) is kept in memory, for the log assertions. */
export interface CapturedGateway {
  gateway: Gateway;
  lines: string[];
  close(): Promise<void>;
}

/** A stream for a logger's destination that keeps each written line. */
export function lineSink(): { stream: Writable; lines: string[] } {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      lines.push(...String(chunk).split("\n").filter(Boolean));
      done();
    },
  });
  return { stream, lines };
}

export async function startCapturedGateway(natsUrl: string, env: Record<string, string> = {}, level = "info"): Promise<CapturedGateway> {
  const { stream: sink, lines } = lineSink();
  const config = GatewayEnvSchema.parse({
    TOOLGATE_IDENTITIES: JSON.stringify([
      {
        name: "admin",
        key: ADMIN_KEY,
        agents: "*",
        permissions: ["configuration:read", "configuration:write", "runtime:read", "runtime:write", "tools:execute"],
      },
    ]),
    ...env,
    NATS_URL: natsUrl,
    TOOLGATE_HTTP_PORT: "0",
    LOG_LEVEL: level,
  });
  const logger = createLogger({ level, destination: sink });
  const gateway = await createGateway({ config, logger, execution: { leaseMs: 5_000, sweepIntervalMs: 100 } });
  return { gateway, lines, close: () => gateway.close() };
}
