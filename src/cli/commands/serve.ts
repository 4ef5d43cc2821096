import { parseArgs } from "node:util";
import type { Command } from "../command.js";
import { createGateway } from "../../gateway/gateway.js";
import { gatewayConfigFromEnv } from "../../gateway/config.js";

const usage = `Usage: toolgate serve

Starts the gateway: connects to NATS_URL (or starts an embedded nats-server under TOOLGATE_DATA_DIR),
applies streams/, and serves the HTTP API on TOOLGATE_HTTP_HOST:TOOLGATE_HTTP_PORT (GET /healthz,
GET /readyz, /v1/..., GET /metrics unless TOOLGATE_METRICS_PORT moves it). Configuration is read from
the environment and checked first: a bad value stops it with exit code 1, naming the variable. Every
variable is listed in docs/operations.md.

On SIGTERM or SIGINT it stops taking connections, lets in-flight HTTP requests and receipts finish,
drains NATS, flushes its log and exits 0; after TOOLGATE_SHUTDOWN_TIMEOUT_MS, or on a second signal,
it exits 1 at once. If the NATS connection closes for good, it exits 1 so a supervisor restarts it.`;

export const serveCommand: Command = {
  name: "serve",
  summary: "Run the gateway (HTTP API; embedded nats-server unless NATS_URL is set)",
  usage,
  async run(argv) {
    parseArgs({ args: argv, options: {} });
    const config = gatewayConfigFromEnv();
    const gateway = await createGateway({ config });
    const log = gateway.app.log;
    let stopping: Promise<void> | undefined;
    let exitCode = 0;

    const stop = (reason: string) => {
      if (stopping) {
        log.warn({ reason }, "second stop request: exiting now");
        process.exit(1);
      }
      log.info({ reason, timeout_ms: config.TOOLGATE_SHUTDOWN_TIMEOUT_MS }, "stopping: finishing in-flight work");
      setTimeout(() => {
        log.error({ timeout_ms: config.TOOLGATE_SHUTDOWN_TIMEOUT_MS }, "graceful stop timed out: exiting");
        process.exit(1);
      }, config.TOOLGATE_SHUTDOWN_TIMEOUT_MS).unref();
      stopping = gateway.close();
      return stopping;
    };
    const stopped = new Promise<void>((resolve) => {
      for (const signal of ["SIGTERM", "SIGINT"] as const) process.on(signal, () => void stop(signal).then(resolve));
      // Reconnection is unbounded, so a close here is final (e.g. credentials revoked): let the supervisor restart us.
      void gateway.nc.closed().then((err) => {
        if (stopping) return;
        log.fatal({ err }, "NATS connection closed for good");
        exitCode = 1;
        void stop("nats connection closed").then(resolve);
      });
    });
    const url = await gateway.listen();
    log.info({ url, metrics: gateway.metricsUrl ?? `${url}/metrics` }, "gateway listening");
    await stopped;
    return exitCode;
  },
};
