import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { GatewayMetrics } from "./metrics.js";

/** A listener that serves only `GET /metrics`, for deployments that keep metrics off the API port. */
export interface MetricsServer {
  readonly port: number;
  close(): Promise<void>;
}

export async function startMetricsServer(metrics: GatewayMetrics, host: string, port: number): Promise<MetricsServer> {
  const server: Server = createServer((req, res) => {
    if (req.method !== "GET" || req.url?.split("?")[0] !== "/metrics") {
      res.writeHead(404, { "content-type": "text/plain" }).end("only GET /metrics here\n");
      return;
    }
    metrics.exposition().then(
      ({ contentType, body }) => res.writeHead(200, { "content-type": contentType }).end(body),
      (err: Error) => res.writeHead(500, { "content-type": "text/plain" }).end(`metrics failed: ${err.message}\n`),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
