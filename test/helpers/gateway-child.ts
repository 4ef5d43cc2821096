/**
 * A gateway in its own process, for the multi-gateway tests: `NATS_URL=... node --import tsx gateway-child.ts`.
 * Prints `{"url": ...}` on stdout once it listens; stops cleanly on SIGTERM.
 */
import { startExecutionGateway } from "./execution-gateway.js";

const gw = await startExecutionGateway(process.env.NATS_URL ?? "", { sweepIntervalMs: 200 });
process.stdout.write(JSON.stringify({ url: gw.baseUrl }) + "\n");
process.once("SIGTERM", () => {
  gw.close().then(
    () => process.exit(0),
    () => process.exit(1),
  );
});
