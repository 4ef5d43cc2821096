import { accessSync, constants, readFileSync } from "node:fs";
import { credsAuthenticator, nkeyAuthenticator, nkeys, type NodeConnectionOptions } from "@nats-io/transport-node";
import { z } from "zod";

/**
 * How a toolgate process (gateway, CLI, ToolRunner) authenticates to NATS and secures the link.
 * Secrets come only from the environment or files; the values are never logged or echoed in errors.
 */
export const NatsClientEnvSchema = z.object({
  NATS_NKEY_SEED_FILE: z.string().min(1).optional().describe("File holding this process's NATS user nkey seed (SU…), mode 0600"),
  NATS_NKEY_SEED: z.string().min(1).optional().describe("The seed itself (prefer NATS_NKEY_SEED_FILE)"),
  NATS_CREDS_FILE: z.string().min(1).optional().describe("A NATS .creds file (user JWT and its seed), for servers in operator/JWT mode"),
  NATS_TLS_CA: z.string().min(1).optional().describe("PEM file of the CA that signed the NATS server's certificate"),
  NATS_TLS_CERT: z.string().min(1).optional().describe("PEM client certificate, when the server verifies clients (with NATS_TLS_KEY)"),
  NATS_TLS_KEY: z.string().min(1).optional().describe("PEM private key of NATS_TLS_CERT"),
});
export type NatsClientEnv = z.infer<typeof NatsClientEnvSchema>;

export class NatsClientConfigError extends Error {
  override readonly name = "NatsClientConfigError";
}

function readable(path: string, name: string): string {
  try {
    accessSync(path, constants.R_OK);
  } catch {
    throw new NatsClientConfigError(`${name}: cannot read ${path}`);
  }
  return path;
}

/** Parses a user seed; the error names the variable, never the value. */
function userSeed(text: string, source: string): Uint8Array {
  const seed = new TextEncoder().encode(text.trim());
  try {
    const pair = nkeys.fromSeed(seed);
    if (!pair.getPublicKey().startsWith("U")) throw new Error("not a user seed");
  } catch {
    throw new NatsClientConfigError(`${source} does not hold a NATS user nkey seed (SU…): create one with 'toolgate nkey'`);
  }
  return seed;
}

/**
 * A `.creds` file as `nsc generate creds` writes it: the user JWT and the user's nkey seed, each
 * between its BEGIN/END lines. Checked here, so a wrong file stops the process at start.
 */
function userCreds(path: string): Uint8Array {
  const text = readFileSync(readable(path, "NATS_CREDS_FILE"), "utf8");
  const jwt = /-{3,}BEGIN NATS USER JWT-{3,}\s+(\S+)\s+-{3,}END NATS USER JWT/.exec(text);
  const seed = /-{3,}BEGIN USER NKEY SEED-{3,}\s+(\S+)\s+-{3,}END USER NKEY SEED/.exec(text);
  if (!jwt || !seed)
    throw new NatsClientConfigError(`NATS_CREDS_FILE ${path} is not a NATS .creds file (a user JWT and its nkey seed, as 'nsc generate creds' writes it)`);
  userSeed(seed[1]!, `NATS_CREDS_FILE ${path}`);
  return new TextEncoder().encode(text);
}

/** The seed named by the settings, or undefined when the connection is unauthenticated. */
export function natsSeed(env: NatsClientEnv): Uint8Array | undefined {
  const given = [env.NATS_NKEY_SEED, env.NATS_NKEY_SEED_FILE, env.NATS_CREDS_FILE].filter((v) => v !== undefined);
  if (given.length > 1) throw new NatsClientConfigError("set only one of NATS_NKEY_SEED, NATS_NKEY_SEED_FILE and NATS_CREDS_FILE");
  if (env.NATS_NKEY_SEED) return userSeed(env.NATS_NKEY_SEED, "NATS_NKEY_SEED");
  if (env.NATS_NKEY_SEED_FILE)
    return userSeed(readFileSync(readable(env.NATS_NKEY_SEED_FILE, "NATS_NKEY_SEED_FILE"), "utf8"), `NATS_NKEY_SEED_FILE ${env.NATS_NKEY_SEED_FILE}`);
  return undefined;
}

/** The public key of the configured seed (what `toolgate nats-config` needs for the gateway user). */
export function natsPublicKey(env: NatsClientEnv): string | undefined {
  const seed = natsSeed(env);
  return seed ? nkeys.fromSeed(seed).getPublicKey() : undefined;
}

/**
 * Connection options from validated settings: nkey or `.creds` (JWT) authentication and TLS (a CA to verify the
 * server; a client certificate and key when the server verifies clients). Checked up front, so a
 * misconfigured process stops at start with the variable's name instead of failing to reconnect later.
 */
export function natsClientOptions(env: NatsClientEnv): Pick<NodeConnectionOptions, "authenticator" | "tls"> {
  const seed = natsSeed(env);
  const creds = env.NATS_CREDS_FILE === undefined ? undefined : userCreds(env.NATS_CREDS_FILE);
  if ((env.NATS_TLS_CERT === undefined) !== (env.NATS_TLS_KEY === undefined))
    throw new NatsClientConfigError("set NATS_TLS_CERT and NATS_TLS_KEY together (or neither)");
  const tls =
    env.NATS_TLS_CA || env.NATS_TLS_CERT
      ? {
          ...(env.NATS_TLS_CA ? { caFile: readable(env.NATS_TLS_CA, "NATS_TLS_CA") } : {}),
          ...(env.NATS_TLS_CERT ? { certFile: readable(env.NATS_TLS_CERT, "NATS_TLS_CERT"), keyFile: readable(env.NATS_TLS_KEY!, "NATS_TLS_KEY") } : {}),
        }
      : undefined;
  const authenticator = creds ? credsAuthenticator(creds) : seed ? nkeyAuthenticator(seed) : undefined;
  return { ...(authenticator ? { authenticator } : {}), ...(tls ? { tls } : {}) };
}

/** Reads the NATS client settings from an environment (unknown variables ignored, empty ones unset). */
export function natsClientEnv(env: Record<string, string | undefined> = process.env): NatsClientEnv {
  const relevant = Object.fromEntries(Object.keys(NatsClientEnvSchema.shape).map((k) => [k, env[k] === "" ? undefined : env[k]]));
  return NatsClientEnvSchema.parse(relevant);
}
