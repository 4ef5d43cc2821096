import { hostname } from "node:os";
import { connect, type ConnectionOptions, type NatsConnection } from "@nats-io/transport-node";
import { z } from "zod";
import { envVar, parseEnv } from "../validation/env.js";
import { natsServers } from "./servers.js";
import { localNatsUrlFile, readLocalNatsUrl } from "./local-nats.js";
import { NatsClientConfigError, NatsClientEnvSchema, natsClientOptions, type NatsClientEnv } from "./client-options.js";

const SERVER = /^(?:(?:nats|tls):\/\/)?(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+)(?::\d{1,5})?$/;
const file = "a readable file path";
const client = NatsClientEnvSchema.shape;

/** The NATS part of the environment, shared by `toolgate serve` and the operator commands. */
export const NatsEnvShape = {
  NATS_URL: envVar(
    z
      .string()
      .refine((v) => v.split(",").every((s) => SERVER.test(s.trim())), "not a comma-separated list of NATS servers")
      .optional(),
    {
      meaning:
        "NATS server(s) of the cluster, comma-separated; the client fails over between them. Unset: `serve` starts an embedded `nats-server` child (store `$TOOLGATE_DATA_DIR/nats`, port `TOOLGATE_EMBEDDED_NATS_PORT`) and writes its URL to `$TOOLGATE_DATA_DIR/nats.url`; the other commands read it there",
      allowed: "`nats://host:port[,nats://host:port...]` (`tls://` or bare `host:port` also)",
    },
  ),
  NATS_NKEY_SEED_FILE: envVar(client.NATS_NKEY_SEED_FILE, {
    meaning: "file holding this process's NATS user nkey seed (`toolgate nkey`), mode 0600, e.g. a mounted Secret; docs/security.md",
    allowed: file,
  }),
  NATS_NKEY_SEED: envVar(client.NATS_NKEY_SEED, {
    meaning: "the seed itself (prefer `NATS_NKEY_SEED_FILE`); set one of the two",
    allowed: "a NATS user seed (`SU...`)",
  }),
  NATS_CREDS_FILE: envVar(client.NATS_CREDS_FILE, {
    meaning:
      "a `.creds` file (user JWT and its nkey seed, `nsc generate creds`) for a NATS server in operator/JWT mode, instead of the nkey seed; docs/nats-accounts.md",
    allowed: file,
  }),
  NATS_TLS_CA: envVar(client.NATS_TLS_CA, { meaning: "PEM file of the CA that signed the NATS server's certificate", allowed: file }),
  NATS_TLS_CERT: envVar(client.NATS_TLS_CERT, { meaning: "PEM client certificate, when the server verifies clients (with `NATS_TLS_KEY`)", allowed: file }),
  NATS_TLS_KEY: envVar(client.NATS_TLS_KEY, { meaning: "PEM private key of `NATS_TLS_CERT`", allowed: file }),
} as const;

const NatsEnvSchema = z.object(NatsEnvShape);
export type NatsEnv = z.infer<typeof NatsEnvSchema>;

/**
 * Connection options for a long-running process: reconnect forever (a rolling restart of the NATS
 * cluster must not leave a live process with a dead connection), name the connection after the
 * host (so `nats-server`'s connz shows which pod it is), nkey credentials and TLS.
 */
export function natsConnectionOptions(env: NatsClientEnv & { NATS_URL: string }, role: string): ConnectionOptions {
  return {
    servers: natsServers(env.NATS_URL),
    name: `toolgate-${role}@${hostname()}`,
    maxReconnectAttempts: -1,
    // Every KV read/write and JetStream publish is a request; async traces would capture two stack
    // traces for each (about a tenth of the gateway's CPU under load).
    noAsyncTraces: true,
    ...natsClientOptions(env),
  };
}

/**
 * Connects an operator command (`streams apply`, `migrate`, `status`): `--server`, else NATS_URL, else
 * the URL a local `toolgate serve` wrote for its embedded nats-server; credentials and TLS come from
 * the environment. Gives up after a few attempts instead of waiting forever.
 */
export async function connectForCommand(server: string | undefined, env: Record<string, string | undefined> = process.env): Promise<NatsConnection> {
  const nats = parseEnv(
    NatsEnvSchema,
    { ...env, NATS_URL: server ?? env.NATS_URL ?? readLocalNatsUrl(env.TOOLGATE_DATA_DIR) },
    NatsEnvError,
    "NATS configuration",
  );
  if (nats.NATS_URL === undefined)
    throw new NatsEnvError(
      `no NATS server: pass --server URL, set NATS_URL, or run 'toolgate serve' from this directory first (it writes ${localNatsUrlFile(env.TOOLGATE_DATA_DIR)})`,
    );
  try {
    return await connect({ ...natsConnectionOptions({ ...nats, NATS_URL: nats.NATS_URL }, "cli"), maxReconnectAttempts: 3 });
  } catch (err) {
    if (err instanceof NatsClientConfigError) throw new NatsEnvError(err.message);
    throw err;
  }
}

/** A missing or malformed NATS setting of an operator command (a usage error). */
export class NatsEnvError extends Error {
  override readonly name = "NatsEnvError";
}
