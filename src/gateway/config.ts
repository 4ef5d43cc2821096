import { z } from "zod";
import { NatsClientConfigError, NatsClientEnvSchema, natsClientOptions } from "../nats/client-options.js";
import { ReplicasSchema } from "../streams/definitions.js";

/** The gateway's environment. Every value is checked at start; a bad one stops it with its name. */
export const GatewayEnvSchema = z.object({
  NATS_URL: z.string().min(1).optional().describe("NATS server(s); when unset an embedded nats-server is started"),
  TOOLGATE_HTTP_PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  TOOLGATE_HTTP_HOST: z.string().min(1).default("127.0.0.1"),
  TOOLGATE_DATA_DIR: z.string().min(1).default("./.toolgate"),
  TOOLGATE_IDENTITIES_FILE: z.string().min(1).optional(),
  TOOLGATE_IDENTITIES: z.string().min(1).optional(),
  TOOLGATE_STREAM_REPLICAS: ReplicasSchema.default(1),
  TOOLGATE_CLAIM_LEASE_MS: z.coerce.number().int().min(100).max(3_600_000).default(30_000).describe("How long an unconfirmed claim lives before it returns to the candidates"),
  TOOLGATE_MAX_CLAIMS_PER_EXECUTOR: z.coerce.number().int().min(1).max(1024).default(64).describe("Claims one executor may hold at once (claimed or running); beyond it a claim is refused with too_many_claims"),
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  ...NatsClientEnvSchema.shape,
  TOOLGATE_HTTP_BODY_LIMIT: z.coerce.number().int().min(1024).max(256 * 1024 * 1024).default(4 * 1024 * 1024).describe("Largest request body in bytes (413 beyond)"),
  TOOLGATE_JSON_MAX_DEPTH: z.coerce.number().int().min(8).max(1024).default(64).describe("Deepest nesting of a JSON body or NATS message"),
  TOOLGATE_RATE_LIMIT_RPS: z.coerce.number().positive().max(1_000_000).default(100).describe("Requests per second each API identity may make (token bucket refill)"),
  TOOLGATE_RATE_LIMIT_BURST: z.coerce.number().int().min(1).max(1_000_000).default(200).describe("Bucket size: requests an identity may make at once"),
});

export type GatewayConfig = z.infer<typeof GatewayEnvSchema>;

export class GatewayConfigError extends Error {
  override readonly name = "GatewayConfigError";
}

/** Reads the gateway configuration from the environment (unknown variables are ignored). */
export function gatewayConfigFromEnv(env: Record<string, string | undefined> = process.env): GatewayConfig {
  const relevant = Object.fromEntries(Object.keys(GatewayEnvSchema.shape).map((k) => [k, env[k] === "" ? undefined : env[k]]));
  const parsed = GatewayEnvSchema.safeParse(relevant);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join(".")}=${JSON.stringify(relevant[String(i.path[0])])}: ${i.message}`);
    throw new GatewayConfigError(`invalid gateway configuration:\n${lines.join("\n")}\nFix the environment variable(s) above; see docs/configuration.md.`);
  }
  if (parsed.data.TOOLGATE_IDENTITIES && parsed.data.TOOLGATE_IDENTITIES_FILE)
    throw new GatewayConfigError("set only one of TOOLGATE_IDENTITIES and TOOLGATE_IDENTITIES_FILE");
  try {
    natsClientOptions(parsed.data); // files readable, seed well-formed: fail at start, not on first reconnect
  } catch (err) {
    if (err instanceof NatsClientConfigError) throw new GatewayConfigError(err.message);
    throw err;
  }
  return parsed.data;
}
