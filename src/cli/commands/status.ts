import { parseArgs } from "node:util";
import { jetstreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Command } from "../command.js";
import { connectForCommand } from "../../nats/connect.js";
import { declaredStreamNames, defaultStreamsDir, inspectStreams, loadDefinitions, type JetStreamSnapshot } from "../../streams/index.js";

const usage = `Usage: toolgate status [--json] [--server URL] [--dir DIR]

Prints what an operator checks first: the NATS server, every declared stream (messages, bytes,
replicas, cluster leader and current replicas), every durable consumer of those streams (pending,
ack pending, redelivered, waiting pulls).

  --json         one JSON document instead of tables
  --server URL   NATS server (default: NATS_URL; credentials from NATS_USER/NATS_PASSWORD)
  --dir DIR      definitions directory (default: the package's streams/)

Exit codes: 0 everything readable, 1 a declared stream is missing or unreadable (e.g. no quorum).`;

export interface StatusReport {
  server: { name: string; version: string; cluster?: string; url: string };
  jetstream: JetStreamSnapshot;
}

async function collectStatus(nc: NatsConnection, streamNames: string[]): Promise<StatusReport> {
  const jsm = await jetstreamManager(nc);
  const info = nc.info;
  return {
    server: { name: info?.server_name ?? "?", version: info?.version ?? "?", ...(info?.cluster ? { cluster: info.cluster } : {}), url: nc.getServer() },
    jetstream: await inspectStreams(jsm, streamNames),
  };
}

/** Left-aligned text columns, right-aligned numbers. */
function table(header: string[], rows: (string | number)[][]): string[] {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
  const cell = (v: string | number, i: number) => (typeof v === "number" ? String(v).padStart(widths[i]!) : String(v).padEnd(widths[i]!));
  return [header.map((h, i) => h.padEnd(widths[i]!)).join("  "), ...rows.map((r) => r.map(cell).join("  "))].map((l) => "  " + l.trimEnd());
}

function render(report: StatusReport): string {
  const { server, jetstream } = report;
  const lines = [`NATS ${server.url}: server ${server.name} ${server.version}${server.cluster ? `, cluster ${server.cluster}` : ""}`, "", "Streams"];
  lines.push(
    ...table(
      ["stream", "messages", "bytes", "replicas", "leader", "current", "problem"],
      jetstream.streams.map((s) => [s.name, s.messages, s.bytes, s.replicas, s.leader ?? "-", s.currentReplicas === undefined ? "-" : `${s.currentReplicas}/${s.replicas}`, s.error ?? ""]),
    ),
    "",
    "Consumers",
  );
  if (jetstream.consumers.length === 0) lines.push("  (none)");
  else
    lines.push(
      ...table(
        ["stream", "consumer", "pending", "ack_pending", "redelivered", "waiting", "max_ack_pending"],
        jetstream.consumers.map((c) => [c.stream, c.name, c.pending, c.ackPending, c.redelivered, c.waiting, c.maxAckPending]),
      ),
    );
  return lines.join("\n");
}

export const statusCommand: Command = {
  name: "status",
  summary: "Show streams, consumers (pending, ack pending, redelivered) and their cluster state",
  usage,
  async run(argv) {
    const { values } = parseArgs({ args: argv, options: { json: { type: "boolean", default: false }, server: { type: "string" }, dir: { type: "string" } } });
    const defs = loadDefinitions(values.dir ?? defaultStreamsDir);
    const nc = await connectForCommand(values.server);
    try {
      const report = await collectStatus(nc, declaredStreamNames(defs));
      process.stdout.write((values.json ? JSON.stringify(report, null, 2) : render(report)) + "\n");
      return report.jetstream.streams.some((s) => s.error !== undefined) ? 1 : 0;
    } finally {
      await nc.drain();
    }
  },
};
