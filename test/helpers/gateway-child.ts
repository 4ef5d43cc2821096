/**
 * A gateway in its own process, for the multi-gateway and fault tests: `NATS_URL=... node --import tsx gateway-child.ts`.
 * Execution options (lease, sweep...) come as JSON in TOOLGATE_TEST_EXECUTION, gateway settings
 * (replicas, rate limits...) as JSON in TOOLGATE_TEST_ENV. Prints `{"url": ...}`
 * on stdout once it listens; stops cleanly on SIGTERM.
 */
import type { ExecutionOptions } from "../../src/execution/execution.js";
import { startExecutionGateway } from "./execution-gateway.js";

const execution = JSON.parse(process.env.TOOLGATE_TEST_EXECUTION ?? "{}") as Partial<ExecutionOptions>;
const env = JSON.parse(process.env.TOOLGATE_TEST_ENV ?? "{}") as Record<string, string>;
const gw = await startExecutionGateway(process.env.NATS_URL ?? "", { sweepIntervalMs: 200, ...execution }, env);
process.stdout.write(JSON.stringify({ url: gw.baseUrl }) + "\n");
process.once("SIGTERM", () => {
  gw.close().then(
    () => process.exit(0),
    () => process.exit(1),
  );
});
