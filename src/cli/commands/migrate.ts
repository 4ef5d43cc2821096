import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { UsageError, type Command } from "../command.js";
import { ConfigStore } from "../../config/config-store.js";
import { connectForCommand } from "../../nats/connect.js";
import { legacyObjectsFromExport, legacyObjectsFromStore, migrate } from "../../migrate/migrate.js";

const usage = `Usage: toolgate migrate (--from FILE | --stored) [--dry-run] [--server URL]

Converts legacy configuration to the byte-budget protocol and stores it in the tg_config bucket under
the same ids: tools carrying max_result_tokens / max_result_bytes lose them and get
max_result_context_bytes = 16384 (the default). Prints every change. Safe to run twice: objects
already migrated are reported unchanged. Nothing is deleted or overwritten; execution history is not
touched.

  --from FILE   a legacy JSON export {"bindings": [...], "toolsets": [...], "agents": [...], "sessions": [...]}
  --stored      the legacy objects stored in tg_config under legacy.<key> (e.g. legacy.toolsets.tasks.v1)
  --dry-run     report only
  --server URL  NATS server (default: NATS_URL, else .toolgate/nats.url of a local serve; credentials
                and TLS from NATS_NKEY_SEED_FILE or NATS_CREDS_FILE, NATS_TLS_*); the streams
                must have been applied

The report goes to stdout; progress ("migrate: 100/2000 checked") to stderr.`;

const PROGRESS_EVERY = 100;

export const migrateCommand: Command = {
  name: "migrate",
  summary: "Migrate legacy tool configurations (max_result_tokens/max_result_bytes) to max_result_context_bytes",
  usage,
  async run(argv) {
    const { values } = parseArgs({
      args: argv,
      options: {
        from: { type: "string" },
        stored: { type: "boolean", default: false },
        "dry-run": { type: "boolean", default: false },
        server: { type: "string" },
      },
    });
    if ((values.from === undefined) === !values.stored) throw new UsageError("give exactly one of --from FILE or --stored");
    const print = (line: string) => process.stdout.write(line + "\n");
    const nc = await connectForCommand(values.server);
    try {
      const store = await ConfigStore.open(nc);
      let objects;
      if (values.from !== undefined) {
        const fromFile = legacyObjectsFromExport(JSON.parse(readFileSync(values.from, "utf8")), values.from);
        for (const section of fromFile.ignored) print(`${values.from}: section '${section}' is not configuration; left untouched`);
        objects = fromFile.objects;
      } else {
        objects = await legacyObjectsFromStore(store);
      }
      process.stderr.write(`migrate: ${objects.length} legacy object(s) to check\n`);
      const progress = (done: number, total: number) => {
        if (done % PROGRESS_EVERY === 0 || done === total) process.stderr.write(`migrate: ${done}/${total} checked\n`);
      };
      const report = await migrate(store, objects, { dryRun: values["dry-run"], progress });
      report.lines.forEach(print);
      print(
        `migrate: ${report.created} ${values["dry-run"] ? "to create" : "created"}, ${report.unchanged} unchanged, ${report.failed} failed${report.created === 0 && report.failed === 0 ? " (no changes)" : ""}`,
      );
      return report.failed > 0 ? 1 : 0;
    } finally {
      await nc.drain();
    }
  },
};
