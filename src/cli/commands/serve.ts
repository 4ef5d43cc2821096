import { parseArgs } from "node:util";
import { UsageError, type Command } from "../command.js";
import { createGateway } from "../../gateway/gateway.js";
import { gatewayConfigFromEnv } from "../../gateway/config.js";
import { whenLauncherGone } from "../launcher.js";

const usage = `Usage: toolgate serve [--host HOST] [--port N]

Starts the gateway: connects to NATS_URL (or starts an embedded nats-server under TOOLGATE_DATA_DIR,
on TOOLGATE_EMBEDDED_NATS_PORT, default 14222, and writes its URL to TOOLGATE_DATA_DIR/nats.url),
applies streams/, and serves the HTTP API on TOOLGATE_HTTP_HOST:TOOLGATE_HTTP_PORT (GET /healthz,
GET /readyz, /v1/..., GET /metrics unless TOOLGATE_METRICS_PORT moves it). Configuration is read from
the environment and checked first: a bad value stops it with exit code 1, naming the variable. Every
variable is listed in docs/operations.md.

  --host HOST  bind address of the HTTP API (overrides TOOLGATE_HTTP_HOST, default 127.0.0.1)
  --port N     HTTP API port (overrides TOOLGATE_HTTP_PORT, default 8080; 0 picks a free one)

On SIGTERM or SIGINT it stops taking connections, lets in-flight HTTP requests and receipts finish,
drains NATS, flushes its log and exits 0; after TOOLGATE_SHUTDOWN_TIMEOUT_MS, or on a second signal,
it exits 1 at once. Started through npm or npx (npx toolgate serve), it also stops so when the npm
process that started it is gone: npm does not pass SIGTERM on. If the NATS connection closes for
good, it exits 1 so a supervisor restarts it. A start that fails (e.g. the HTTP port is taken) stops
what it started, the embedded nats-server included, and exits 1.`;

export const serveCommand: Command = {
  name: "serve",
  summary: "Run the gateway (HTTP API; embedded nats-server unless NATS_URL is set)",
  usage,
  async run(argv) {
    let flags: { host?: string; port?: string };
    try {
      ({ values: flags } = parseArgs({ args: argv, options: { host: { type: "string" }, port: { type: "string" } } }));
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
    // The flags are the variables under another name: one schema checks both.
    const config = gatewayConfigFromEnv({
      ...process.env,
      ...(flags.host !== undefined ? { TOOLGATE_HTTP_HOST: flags.host } : {}),
      ...(flags.port !== undefined ? { TOOLGATE_HTTP_PORT: flags.port } : {}),
    });
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
      whenLauncherGone(() => {
        if (stopping) return;
        log.warn("the npm process that started the gateway is gone (npm passes no SIGTERM on): stopping as on SIGTERM");
        void stop("launcher gone").then(resolve);
      });
      // Reconnection is unbounded, so a close here is final (e.g. credentials revoked): let the supervisor restart us.
      void gateway.nc.closed().then((err) => {
        if (stopping) return;
        log.fatal({ err }, "NATS connection closed for good");
        exitCode = 1;
        void stop("nats connection closed").then(resolve);
      });
    });
    let url: string;
    try {
      url = await gateway.listen();
    } catch (err) {
      const inUse = (err as NodeJS.ErrnoException).code === "EADDRINUSE";
      const where = `${config.TOOLGATE_HTTP_HOST}:${config.TOOLGATE_HTTP_PORT}`;
      log.fatal(
        { err },
        inUse ? `cannot listen: ${where} is taken; stop what holds it or choose another port (--port, TOOLGATE_HTTP_PORT)` : `cannot listen on ${where}`,
      );
      await stop("listen failed");
      return 1;
    }
    log.info({ url, metrics: gateway.metricsUrl ?? `${url}/metrics` }, "gateway listening");
    await stopped;
    return exitCode;
  },
};
