import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createGateway, type Gateway, type GatewayOptions } from "../../src/gateway/gateway.js";
import { gatewayConfigFromEnv } from "../../src/gateway/config.js";
import type { IdentityConfig } from "../../src/http/identities.js";
import { PERMISSIONS } from "../../src/http/identities.js";
import { createLogger } from "../../src/log/logger.js";

export const ADMIN_KEY = "test-admin-key-0123456789";
export const admin: IdentityConfig = { name: "admin", key: ADMIN_KEY, agents: "*", permissions: [...PERMISSIONS] };
export const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

/**
 * A gateway on the given NATS (never embedded), with a temporary data dir, on a random HTTP port;
 * `env` adds environment variables (NATS credentials, TLS, limits).
 */
export async function startTestGateway(
  natsUrl: string,
  identities: IdentityConfig[] = [admin],
  options: Omit<GatewayOptions, "config" | "logger"> & { env?: Record<string, string> } = {},
): Promise<Gateway & { dataDir: string }> {
  const dataDir = mkdtempSync(join(tmpdir(), "toolgate-gw-"));
  const { env, ...gatewayOptions } = options;
  // A random port unless the test names one (a gateway restarted where its clients know it).
  const config = gatewayConfigFromEnv({
    ...env,
    NATS_URL: natsUrl,
    TOOLGATE_HTTP_PORT: env?.TOOLGATE_HTTP_PORT ?? "0",
    TOOLGATE_DATA_DIR: dataDir,
    TOOLGATE_IDENTITIES: JSON.stringify(identities),
  });
  // Silent, unless a failing suite is being looked into: TOOLGATE_TEST_LOG=error (or any pino level) prints the gateways' logs.
  const gateway = await createGateway({ ...gatewayOptions, config, logger: createLogger({ level: process.env.TOOLGATE_TEST_LOG ?? "silent" }) });
  return {
    ...gateway,
    dataDir,
    async close() {
      await gateway.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export const bindingExample = { binding_id: "binding_example", executor_scope: "tasks-product", tool_kind: "read" };

/** The seed's tool definition (docs/protocol.md section 5). */
export const tasksRead = {
  name: "tasks.read",
  description: "Read tasks page by page",
  binding_id: "binding_example",
  input_schema: { type: "object", properties: { cursor: { type: "string" } } },
  output_schema: { type: "object" },
  max_result_context_bytes: 16384,
};
