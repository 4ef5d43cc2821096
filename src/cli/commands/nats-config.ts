import { readFileSync, renameSync, writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { connect } from "@nats-io/transport-node";
import { z } from "zod";
import { ConfigStore } from "../../config/config-store.js";
import { ExecutorStore } from "../../executors/executor-store.js";
import { ExecutorSchema, RegisterExecutorSchema, UserNkeySchema, type Executor } from "../../executors/schemas.js";
import { natsClientEnv, natsClientOptions, natsPublicKey } from "../../nats/client-options.js";
import { renderNatsAuth } from "../../security/nats-auth.js";
import { UsageError, type Command } from "../command.js";

const usage = `Usage: toolgate nats-config [--gateway-nkey KEY]... [--executors FILE] [--server URL] [--out FILE]

Generates the nats-server 'accounts' block that confines every registered executor to its scope
(see docs/security.md for the permission matrix). Include it from the server config
('include "auth.conf"') and reload the server after each change.

  --gateway-nkey KEY  public nkey of the gateway (repeat during a rotation); default: the public key
                      of NATS_NKEY_SEED_FILE / NATS_NKEY_SEED, the gateway's own credentials
  --executors FILE    read executors from a JSON array (the POST /v1/executors bodies) instead of
                      the registry; for bootstrapping before the gateway has ever run
  --server URL        NATS server holding the registry (default: NATS_URL); connects with the
                      NATS_NKEY_SEED_FILE / NATS_TLS_* credentials
  --out FILE          write the file atomically (default: stdout)`;

async function registryExecutors(server: string): Promise<Executor[]> {
  const nc = await connect({ servers: server, name: "toolgate-nats-config", ...natsClientOptions(natsClientEnv()) });
  try {
    return await (await ExecutorStore.open(nc, await ConfigStore.open(nc))).list();
  } finally {
    await nc.drain();
  }
}

function fileExecutors(path: string): Executor[] {
  const parsed = z.array(RegisterExecutorSchema).safeParse(JSON.parse(readFileSync(path, "utf8")));
  if (!parsed.success) throw new UsageError(`${path}: ${parsed.error.issues.map((i) => `[${i.path.join(".")}] ${i.message}`).join("; ")}`);
  const at = new Date(0).toISOString(); // fixed, so the output depends on the file only
  return parsed.data.map((e) => ExecutorSchema.parse({ ...e, created_at: at, updated_at: at }));
}

export const natsConfigCommand: Command = {
  name: "nats-config",
  summary: "Generate the nats-server accounts/permissions block from the registered executors",
  usage,
  async run(argv) {
    const { values } = parseArgs({
      args: argv,
      options: { "gateway-nkey": { type: "string", multiple: true }, executors: { type: "string" }, server: { type: "string" }, out: { type: "string" } },
    });
    const given = values["gateway-nkey"] ?? [];
    for (const key of given)
      if (!UserNkeySchema.safeParse(key).success) throw new UsageError(`--gateway-nkey ${key.slice(0, 4)}…: not a user public nkey (U…)`);
    const own = given.length === 0 ? natsPublicKey(natsClientEnv()) : undefined;
    const gatewayNkeys = own ? [own] : given;
    if (gatewayNkeys.length === 0) throw new UsageError("no gateway key: pass --gateway-nkey KEY or set NATS_NKEY_SEED_FILE to the gateway's seed");

    let executors: Executor[];
    if (values.executors) executors = fileExecutors(values.executors);
    else {
      const server = values.server ?? process.env.NATS_URL;
      if (!server) throw new UsageError("no registry: pass --server URL (or set NATS_URL), or --executors FILE");
      executors = await registryExecutors(server);
    }
    // Registered without an identity (local development): nothing of it can go into the server config.
    for (const ex of executors.filter((e) => e.nkeys.length === 0))
      process.stderr.write(
        `executor ${ex.executor_id} has no nkey: it cannot connect under this config; add one with PUT /v1/executors/${ex.executor_id}/nkeys\n`,
      );
    const text = renderNatsAuth({ gatewayNkeys, executors });
    if (!values.out) process.stdout.write(text);
    else {
      // Atomic, so a server reload never reads half a file.
      writeFileSync(`${values.out}.tmp`, text, { mode: 0o644 });
      renameSync(`${values.out}.tmp`, values.out);
      process.stderr.write(`wrote ${values.out}: ${executors.length} executor(s)\n`);
    }
    return 0;
  },
};
