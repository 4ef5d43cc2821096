import { parseArgs } from "node:util";
import { jetstreamManager } from "@nats-io/jetstream";
import { UsageError, type Command } from "../command.js";
import { connectForCommand } from "../../nats/connect.js";
import { requireSupportedServer } from "../../nats/server-version.js";
import { applyStreams, loadDefinitions, ReplicasSchema, defaultStreamsDir } from "../../streams/index.js";

const usage = `Usage: toolgate streams apply [--dry-run] [--force] [--replicas N] [--server URL] [--dir DIR]

Compares the JetStream streams, consumers and KV buckets declared in streams/ with the server, prints
one line per object (+ create, ~ update, ! recreate, = unchanged), then applies the changes.
Changes that may lose data (retention or storage changes, shrunk limits) are refused unless --force.

  --dry-run      print the plan only
  --force        also apply destructive changes (may delete stored messages)
  --replicas N   replicas per stream/bucket (default: TOOLGATE_STREAM_REPLICAS or 1; 3 on a cluster)
  --server URL   NATS server (default: NATS_URL, else .toolgate/nats.url of a local serve;
                 credentials and TLS from NATS_NKEY_SEED_FILE or NATS_CREDS_FILE, NATS_TLS_*)
  --dir DIR      definitions directory (default: the package's streams/)

The plan and a "done:" line per applied change go to stdout as they happen. Streams are changed in
place where JetStream allows it; replica changes are applied by the servers in the background (watch
'toolgate status' until every replica is current).`;

export const streamsCommand: Command = {
  name: "streams",
  summary: "Apply the declared JetStream streams, consumers and KV buckets (shows a diff first)",
  usage,
  async run(argv) {
    const { values, positionals } = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        "dry-run": { type: "boolean", default: false },
        force: { type: "boolean", default: false },
        replicas: { type: "string" },
        server: { type: "string" },
        dir: { type: "string" },
      },
    });
    if (positionals.length !== 1 || positionals[0] !== "apply") throw new UsageError("expected the sub-command 'apply'");
    const replicas = ReplicasSchema.safeParse(values.replicas ?? process.env.TOOLGATE_STREAM_REPLICAS ?? 1);
    if (!replicas.success) throw new UsageError("--replicas (or TOOLGATE_STREAM_REPLICAS) must be an integer from 1 to 5");

    const defs = loadDefinitions(values.dir ?? defaultStreamsDir);
    process.stderr.write(`streams: ${defs.length} declared object(s); reading the server's state\n`);
    const nc = await connectForCommand(values.server);
    try {
      const server = requireSupportedServer(nc, { replicas: replicas.data }, (warning) => process.stderr.write(`streams: warning: ${warning}\n`));
      process.stderr.write(`streams: nats-server ${server.version} (${server.serverName})\n`);
      const jsm = await jetstreamManager(nc);
      const print = (line: string) => process.stdout.write(line + "\n");
      const result = await applyStreams(jsm, defs, { replicas: replicas.data, force: values.force, dryRun: values["dry-run"], progress: print });
      if (result.refused.length > 0) {
        print(`refused: ${result.refused.length} destructive change(s), nothing applied; re-run with --force after reviewing them`);
        return 1;
      }
      print(result.applied ? "streams: up to date" : "dry run: nothing applied");
      return 0;
    } finally {
      await nc.drain();
    }
  },
};
