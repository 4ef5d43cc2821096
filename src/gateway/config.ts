import { z } from "zod";
import { NatsClientConfigError, natsClientOptions } from "../nats/client-options.js";
import { NatsEnvShape } from "../nats/connect.js";
import { DEFAULT_DATA_DIR, DEFAULT_EMBEDDED_NATS_PORT } from "../nats/local-nats.js";
import { ReplicasSchema } from "../streams/definitions.js";
import { envVar, parseEnv, renderEnvTable } from "../validation/env.js";
import { CURRENT_STORE_LAYOUT, STORE_LAYOUTS } from "../execution/model/store-layout.js";

const port = (min: number) => z.coerce.number().int().min(min).max(65535);
const ms = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

const GatewayEnvShape = {
  ...NatsEnvShape,
  TOOLGATE_HTTP_HOST: envVar(z.string().min(1).default("127.0.0.1"), {
    meaning: "bind address of the HTTP API (and of the metrics listener); `0.0.0.0` in a container",
    allowed: "an IP address or host name",
  }),
  TOOLGATE_HTTP_PORT: envVar(port(0).default(8080), { meaning: "HTTP API port; 0 picks a free one (logged)", allowed: "integer 0..65535" }),
  TOOLGATE_METRICS_PORT: envVar(port(0).optional(), {
    meaning:
      "unset: `GET /metrics` is served on the API port, unauthenticated. Set: only on this separate port (bind it to a network Prometheus reaches and the API's clients do not)",
    allowed: "integer 0..65535",
  }),
  TOOLGATE_DATA_DIR: envVar(z.string().min(1).default(DEFAULT_DATA_DIR), {
    meaning:
      "local state: the embedded NATS store and its URL in `nats.url` (without `NATS_URL`) and a generated local admin key (without identities). Nothing a replica needs to share",
    allowed: "a writable directory path",
  }),
  TOOLGATE_EMBEDDED_NATS_PORT: envVar(port(0).default(DEFAULT_EMBEDDED_NATS_PORT), {
    meaning:
      "without `NATS_URL`: client port of the embedded nats-server (not 4222, so it never meets a NATS already there); taken: a free one instead. Its URL is written to `$TOOLGATE_DATA_DIR/nats.url`, where `toolgate status` and `localNatsUrl()` of `toolgate/runner` find it",
    allowed: "integer 0..65535 (0: a free one)",
  }),
  TOOLGATE_IDENTITIES: envVar(z.string().min(1).optional(), {
    meaning: "HTTP identities as JSON (docs/configuration.md); from a secret",
    allowed: "a JSON array of identities",
  }),
  TOOLGATE_IDENTITIES_FILE: envVar(z.string().min(1).optional(), {
    meaning: "path of an identities JSON file, e.g. a mounted Secret; set this or `TOOLGATE_IDENTITIES`, not both",
    allowed: "a readable file path",
  }),
  TOOLGATE_STREAM_REPLICAS: envVar(ReplicasSchema.default(1), {
    meaning: "replicas of every stream, consumer and bucket the gateway creates: 1 on one server, 3 on a 3-node cluster",
    allowed: "integer 1..5",
  }),
  TOOLGATE_CLAIM_LEASE_MS: envVar(ms(100, 3_600_000).default(30_000), {
    meaning: "how long a claim stays unconfirmed (no `accepted`) before the assignment returns to the candidates with the next generation",
    allowed: "integer 100..3600000",
  }),
  TOOLGATE_MAX_CLAIMS_PER_EXECUTOR: envVar(z.coerce.number().int().min(1).max(1024).default(64), {
    meaning:
      "claims one executor may hold at once (claimed or running); beyond it a claim is refused `too_many_claims` (the ToolRunner retries later; keep its `maxConcurrent` below this)",
    allowed: "integer 1..1024",
  }),
  TOOLGATE_MCP_MAX_SESSIONS: envVar(z.coerce.number().int().min(1).max(1_000_000).default(10_000), {
    meaning:
      "MCP sessions one replica keeps open; beyond it the least recently used is closed (a client disconnect: its tool calls go on; the client initializes again)",
    allowed: "integer 1..1000000",
  }),
  TOOLGATE_STORE_LAYOUT: envVar(z.coerce.number().pipe(z.literal(STORE_LAYOUTS)).default(CURRENT_STORE_LAYOUT), {
    meaning:
      "what this gateway writes: 7 keeps the run events of a tool call's creation and of a claim in the assignment record until its next write, which publishes them with its own in one event message (a gateway publishes them itself after 250 ms if no write came), as 6 does otherwise (6 publishes every write's events at once); 6 keeps the lease sweeper's watches as keys of the assignments bucket, so that a tool call's creation publishes its watch right before its assignment without waiting for the watch's reply (one round trip fewer before its candidate goes out), as 5 does otherwise (5 keeps them in the watch bucket; a gateway of this release reads both places whichever it writes, and moves what it finds in the other to its own); 5 publishes the run events of one write as one message of the event stream when there are several (a progress report applied with the final receipt: one event message, not two), as 4 does otherwise; 4 records a progress report by a compare-and-set of its assignment, which carries it in the record (no progress entry; a report that would make the record too large goes to the progress bucket), one event per message, as releases of layout 4 did (they read layouts 1 to 4 only); 3 writes a progress entry instead, which indexes a progress receipt under its claim-bound id, as releases of layout 3 did (they read layouts 1 to 3 only); 2 writes the receipt index entry of such a progress receipt too, as releases of layout 2 did (they read layouts 1 and 2 only); 1 stores projections in the projections bucket, as releases before 2 did (they read nothing else); from 2 on a completed call's projection is stored in its assignment record. Every layout is read. Upgrading a running cluster: set the layout of its oldest release until no gateway of an earlier release runs, then 7",
    allowed: "1, 2, 3, 4, 5, 6 or 7",
  }),
  TOOLGATE_RECEIPT_CONCURRENCY: envVar(z.coerce.number().int().min(1).max(4096).default(64), {
    meaning:
      "receipts one replica processes at once; it pulls up to twice as many from the shared `gateway` consumer. Total throughput scales with replicas × this, up to the consumer's `max_ack_pending`",
    allowed: "integer 1..4096",
  }),
  TOOLGATE_HTTP_BODY_LIMIT: envVar(
    z.coerce
      .number()
      .int()
      .min(1024)
      .max(256 * 1024 * 1024)
      .default(4 * 1024 * 1024),
    {
      meaning: "largest request body in bytes (413 beyond)",
      allowed: "integer 1024..268435456",
    },
  ),
  TOOLGATE_JSON_MAX_DEPTH: envVar(z.coerce.number().int().min(8).max(1024).default(64), {
    meaning: "deepest nesting of a JSON body or NATS message",
    allowed: "integer 8..1024",
  }),
  TOOLGATE_RATE_LIMIT_RPS: envVar(z.coerce.number().positive().max(1_000_000).default(100), {
    meaning: "requests per second each API identity may make (token bucket refill; 429 `rate_limited` beyond)",
    allowed: "a positive number up to 1000000",
  }),
  TOOLGATE_RATE_LIMIT_BURST: envVar(z.coerce.number().int().min(1).max(1_000_000).default(200), {
    meaning: "bucket size: requests an identity may make at once",
    allowed: "integer 1..1000000",
  }),
  TOOLGATE_SHUTDOWN_TIMEOUT_MS: envVar(ms(1_000, 600_000).default(25_000), {
    meaning:
      "on SIGTERM, how long in-flight HTTP requests and receipts may take before the process exits 1 anyway; keep it below the orchestrator's grace period (Kubernetes: 30 s)",
    allowed: "integer 1000..600000",
  }),
  LOG_LEVEL: envVar(z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"), {
    meaning:
      "pino log level; logs are JSON lines on stderr. Each HTTP request's access line (`request completed`) is at debug when it succeeded, at info when refused (4xx), at error when it failed: `toolgate_http_request_duration_seconds` counts every request",
    allowed: "fatal, error, warn, info, debug, trace, silent",
  }),
};

/** The gateway's environment. Every value is checked at start; a bad one stops it with its name. */
export const GatewayEnvSchema = z.object(GatewayEnvShape).superRefine((env, ctx) => {
  if (env.TOOLGATE_IDENTITIES !== undefined && env.TOOLGATE_IDENTITIES_FILE !== undefined)
    ctx.addIssue({ code: "custom", path: ["TOOLGATE_IDENTITIES_FILE"], message: "set only one of TOOLGATE_IDENTITIES and TOOLGATE_IDENTITIES_FILE" });
});

export type GatewayConfig = z.infer<typeof GatewayEnvSchema>;

export class GatewayConfigError extends Error {
  override readonly name = "GatewayConfigError";
}

/** Reads the gateway configuration from the environment (unknown variables are ignored). */
export function gatewayConfigFromEnv(env: Record<string, string | undefined> = process.env): GatewayConfig {
  const config = parseEnv(GatewayEnvSchema, env, GatewayConfigError, "gateway configuration");
  try {
    natsClientOptions(config); // files readable, seed well-formed: fail at start, not on first reconnect
  } catch (err) {
    if (err instanceof NatsClientConfigError) throw new GatewayConfigError(err.message);
    throw err;
  }
  return config;
}

/** The environment table of docs/operations.md. */
export function renderGatewayEnvTable(): string {
  return renderEnvTable(GatewayEnvShape);
}
