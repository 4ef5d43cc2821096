import { parseArgs } from "node:util";
import { jetstreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Command } from "../command.js";
import { executionStores } from "../../kv/buckets.js";
import { presenceTtlMs } from "../../execution/execution.js";
import { isOnline } from "../../execution/claims/presence.js";
import { PresenceRecord } from "../../execution/model/records.js";
import { connectForCommand } from "../../nats/connect.js";
import { declaredStreamNames, defaultStreamsDir, inspectStreams, loadDefinitions, type Definition, type JetStreamSnapshot } from "../../streams/index.js";
import { candidateConsumer, STREAMS } from "../../streams/names.js";

const usage = `Usage: toolgate status [--json] [--server URL] [--dir DIR]

Prints what an operator checks first: the NATS server, every declared stream (messages, bytes,
replicas, cluster leader and current replicas), every durable consumer of those streams (pending,
ack pending, redelivered, waiting pulls), the executors online per scope, and the pending
assignments per scope (candidates no executor has claimed yet).

  --json         one JSON document instead of tables
  --server URL   NATS server (default: NATS_URL, else .toolgate/nats.url of a local serve;
                 credentials and TLS from NATS_NKEY_SEED_FILE or NATS_CREDS_FILE, NATS_TLS_*)
  --dir DIR      definitions directory (default: the package's streams/)

Exit codes: 0 everything readable, 1 a declared stream is missing or unreadable (e.g. no quorum).`;

export interface StatusReport {
  server: { name: string; version: string; cluster?: string; url: string };
  jetstream: JetStreamSnapshot;
  executors: Array<{ scope: string; executor_id: string; bindings: string[]; in_flight: number; seen_ms_ago: number }>;
  /** Per scope: candidates not yet delivered plus delivered but not yet settled by a claim. */
  pending_assignments: Array<{ scope: string; pending: number }>;
}

/** `cand-<scope>`: the prefix of every scope's candidate consumer, from the one place that names them. */
const CANDIDATE_PREFIX = candidateConsumer("");

async function presenceEntries(nc: NatsConnection) {
  const open = await executionStores(nc);
  return (await open("presence", PresenceRecord)).entries();
}

async function collectStatus(nc: NatsConnection, defs: Definition[]): Promise<StatusReport> {
  const jsm = await jetstreamManager(nc);
  const info = nc.info;
  const jetstream = await inspectStreams(jsm, declaredStreamNames(defs));
  const now = Date.now();
  // The presence bucket is read only when every declared stream is there (else the report says what is missing).
  const presence = jetstream.streams.every((s) => s.error === undefined) ? await presenceEntries(nc) : [];
  const ttl = presenceTtlMs(defs);
  return {
    server: { name: info?.server_name ?? "?", version: info?.version ?? "?", ...(info?.cluster ? { cluster: info.cluster } : {}), url: nc.getServer() },
    jetstream,
    executors: presence
      .filter((e) => isOnline(e.value, ttl, now))
      .map(({ value: p }) => ({ scope: p.scope, executor_id: p.executor_id, bindings: p.bindings, in_flight: p.in_flight, seen_ms_ago: now - p.seen_at })),
    pending_assignments: jetstream.consumers.flatMap((c) => {
      if (c.stream !== STREAMS.candidates || !c.name.startsWith(CANDIDATE_PREFIX)) return [];
      return [{ scope: c.name.slice(CANDIDATE_PREFIX.length), pending: c.pending + c.ackPending }];
    }),
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
      jetstream.streams.map((s) => [
        s.name,
        s.messages,
        s.bytes,
        s.replicas,
        s.leader ?? "-",
        s.currentReplicas === undefined ? "-" : `${s.currentReplicas}/${s.replicas}`,
        s.error ?? "",
      ]),
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
  lines.push("", `Executors online: ${report.executors.length}`);
  if (report.executors.length > 0)
    lines.push(
      ...table(
        ["scope", "executor", "in_flight", "seen_ms_ago", "bindings"],
        report.executors.map((e) => [e.scope, e.executor_id, e.in_flight, e.seen_ms_ago, e.bindings.join(",")]),
      ),
    );
  lines.push("", `Pending assignments (not yet claimed): ${report.pending_assignments.reduce((n, p) => n + p.pending, 0)}`);
  if (report.pending_assignments.length > 0)
    lines.push(
      ...table(
        ["scope", "pending"],
        report.pending_assignments.map((p) => [p.scope, p.pending]),
      ),
    );
  return lines.join("\n");
}

export const statusCommand: Command = {
  name: "status",
  summary: "Show streams, consumers (pending, ack pending, redelivered), executors online and pending assignments",
  usage,
  async run(argv) {
    const { values } = parseArgs({ args: argv, options: { json: { type: "boolean", default: false }, server: { type: "string" }, dir: { type: "string" } } });
    const defs = loadDefinitions(values.dir ?? defaultStreamsDir);
    const nc = await connectForCommand(values.server);
    try {
      const report = await collectStatus(nc, defs);
      process.stdout.write((values.json ? JSON.stringify(report, null, 2) : render(report)) + "\n");
      return report.jetstream.streams.some((s) => s.error !== undefined) ? 1 : 0;
    } finally {
      await nc.drain();
    }
  },
};
