import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { checkHistory, formatReport, readEvidence, readHistory, snapshotOf, type ProjectionSnapshot } from "../../checker/index.js";
import { connectForCommand } from "../../nats/connect.js";
import { UsageError, type Command } from "../command.js";

const usage = `Usage: toolgate check-history [--server URL] [--json] [--ledger FILE]... [--outbox FILE]... [--snapshot FILE]

Reads the stored history (receipts stream, receipt index, runs, tool calls, progress, projections)
and checks the protocol's promises: every tool call terminal or reconciliation_required, no receipt
lost or applied twice, no terminated run changed, every projection within budget and unchanged.
Run it on a quiet system (no tool calls in flight); progress goes to stderr.

  --server URL     NATS server(s), comma-separated (default: NATS_URL; credentials and TLS as for streams apply)
  --json           print the report as JSON
  --ledger FILE    an executor's side-effect ledger (SQLite): no write twice, none unconfirmed (repeatable)
  --outbox FILE    an executor's runner store (SQLite, executor stopped): every answered receipt is stored (repeatable)
  --snapshot FILE  projection digests: compared when the file exists, then written with the current ones

Exit codes: 0 no violation, 1 violations, 2 bad arguments.`;

export const checkHistoryCommand: Command = {
  name: "check-history",
  summary: "Check a stored execution history against the protocol's promises (exit 1 on a violation)",
  usage,
  async run(argv) {
    let values: { server?: string; json?: boolean; ledger?: string[]; outbox?: string[]; snapshot?: string };
    try {
      ({ values } = parseArgs({
        args: argv,
        options: {
          server: { type: "string" },
          json: { type: "boolean" },
          ledger: { type: "string", multiple: true },
          outbox: { type: "string", multiple: true },
          snapshot: { type: "string" },
        },
      }));
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
    const evidence = values.ledger || values.outbox ? readEvidence({ ledgers: values.ledger, outboxes: values.outbox }) : undefined;
    const snapshot = values.snapshot && existsSync(values.snapshot) ? (JSON.parse(readFileSync(values.snapshot, "utf8")) as ProjectionSnapshot) : undefined;

    const nc = await connectForCommand(values.server);
    try {
      const history = await readHistory(nc, { progress: (stream, read, total) => process.stderr.write(`check-history: ${stream} ${read}/${total}\n`) });
      const report = checkHistory(history, { evidence, snapshot });
      if (values.snapshot) writeFileSync(values.snapshot, JSON.stringify({ ...snapshot, ...snapshotOf(history) }, null, 1) + "\n");
      process.stdout.write((values.json ? JSON.stringify(report) : formatReport(report)) + "\n");
      return report.ok ? 0 : 1;
    } finally {
      await nc.close();
    }
  },
};
