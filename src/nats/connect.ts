import { hostname } from "node:os";
import { connect, type ConnectionOptions, type NatsConnection } from "@nats-io/transport-node";
import { z } from "zod";
import { envVar, parseEnv } from "../validation/env.js";

const SERVER = /^(?:(?:nats|tls):\/\/)?(?:[^\s/@,]+@)?(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+)(?::\d{1,5})?$/;

/** The NATS part of the environment, shared by `toolgate serve` and the operator commands. */
export const NatsEnvShape = {
  NATS_URL: envVar(
    z
      .string()
      .refine((v) => v.split(",").every((s) => SERVER.test(s.trim())), "not a comma-separated list of NATS servers")
      .optional(),
    {
      meaning: "NATS server(s) of the cluster, comma-separated; the client fails over between them. Unset (`serve` only): an embedded `nats-server` child is started with its store in `$TOOLGATE_DATA_DIR/nats` on a free port",
      allowed: "`nats://host:port[,nats://host:port...]` (`tls://` or bare `host:port` also)",
    },
  ),
  NATS_USER: envVar(z.string().min(1).optional(), { meaning: "NATS user name (with `NATS_PASSWORD`); see `deploy/nats/`", allowed: "any non-empty string" }),
  NATS_PASSWORD: envVar(z.string().min(1).optional(), { meaning: "NATS password of `NATS_USER`; mount it from a secret, never bake it into an image", allowed: "any non-empty string" }),
} as const;

/** Cross-field rule of the NATS variables; every schema that includes {@link NatsEnvShape} applies it. */
export function checkNatsCredentials(env: { NATS_USER?: string | undefined; NATS_PASSWORD?: string | undefined }, ctx: z.RefinementCtx): void {
  if ((env.NATS_USER === undefined) !== (env.NATS_PASSWORD === undefined))
    ctx.addIssue({ code: "custom", path: [env.NATS_USER === undefined ? "NATS_USER" : "NATS_PASSWORD"], message: "set both NATS_USER and NATS_PASSWORD, or neither" });
}

const NatsEnvSchema = z.object(NatsEnvShape).superRefine(checkNatsCredentials);
export type NatsEnv = z.infer<typeof NatsEnvSchema>;

/**
 * Connection options for a long-running process: reconnect forever (a rolling restart of the NATS
 * cluster must not leave a live process with a dead connection) and name the connection after the
 * host, so `nats-server`'s connz shows which pod it is.
 */
export function natsConnectionOptions(env: NatsEnv & { NATS_URL: string }, role: string): ConnectionOptions {
  return {
    servers: env.NATS_URL.split(",").map((s) => s.trim()),
    name: `toolgate-${role}@${hostname()}`,
    maxReconnectAttempts: -1,
    ...(env.NATS_USER !== undefined ? { user: env.NATS_USER, pass: env.NATS_PASSWORD } : {}),
  };
}

/**
 * Connects an operator command (`streams apply`, `migrate`, `status`): `--server` overrides NATS_URL,
 * credentials come from the environment. Gives up after a few attempts instead of waiting forever.
 */
export async function connectForCommand(server: string | undefined, env: Record<string, string | undefined> = process.env): Promise<NatsConnection> {
  const nats = parseEnv(NatsEnvSchema, { ...env, NATS_URL: server ?? env.NATS_URL }, NatsEnvError);
  if (nats.NATS_URL === undefined) throw new NatsEnvError("no NATS server: pass --server URL or set NATS_URL");
  return connect({ ...natsConnectionOptions({ ...nats, NATS_URL: nats.NATS_URL }, "cli"), maxReconnectAttempts: 3 });
}

/** A missing or malformed NATS setting of an operator command (a usage error). */
export class NatsEnvError extends Error {
  override readonly name = "NatsEnvError";
}
