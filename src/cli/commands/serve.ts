import { parseArgs } from "node:util";
import type { Command } from "../command.js";
import { createGateway } from "../../gateway/gateway.js";

const usage = `Usage: toolgate serve

Starts the gateway: connects to NATS_URL (or starts an embedded nats-server under TOOLGATE_DATA_DIR),
applies streams/, and serves the HTTP API on TOOLGATE_HTTP_HOST:TOOLGATE_HTTP_PORT. Stops gracefully
on SIGTERM or SIGINT. Configuration is read from the environment: see docs/configuration.md.`;

export const serveCommand: Command = {
  name: "serve",
  summary: "Run the gateway (HTTP API; embedded nats-server unless NATS_URL is set)",
  usage,
  async run(argv) {
    parseArgs({ args: argv, options: {} });
    const gateway = await createGateway();
    const stopped = new Promise<void>((resolve) => {
      const stop = () => void gateway.close().then(resolve);
      process.once("SIGTERM", stop);
      process.once("SIGINT", stop);
    });
    const url = await gateway.listen();
    gateway.app.log.info({ url }, "gateway listening");
    await stopped;
    return 0;
  },
};
