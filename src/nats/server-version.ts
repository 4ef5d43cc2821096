import type { NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "../log/logger.js";

/**
 * Which nats-server toolgate runs on, decided from what the server says about itself when a client
 * connects (its INFO). The reasons are in docs/operations.md, "Supported NATS servers".
 */

/** The oldest server toolgate runs on at all: the oldest it has been tested on (Debian 12's package). */
export const OLDEST_SERVER = "2.9.10";
/**
 * The oldest server toolgate keeps replicated (R3) storage on: before 2.9.21 a clustered stream
 * checked a write's expected revision outside raft, so two compare-and-set updates of one KV key
 * could both win (nats-io/nats-server#4320), and toolgate's every state change is one.
 */
export const OLDEST_REPLICATED_SERVER = "2.9.21";
/** Lines before this one no longer get fixes from toolgate's point of view: not tested, warned about. */
export const OLDEST_MAINTAINED_LINE = "2.12";
/** The line toolgate's CI runs its whole suite on; the one to upgrade to. */
export const CURRENT_LINE = "2.15";

const HOW_TO_UPGRADE =
  `install a current nats-server (${CURRENT_LINE}.x): \`go install github.com/nats-io/nats-server/v2@latest\`, ` +
  "the nats:latest container image or a release from github.com/nats-io/nats-server/releases; in a toolgate checkout `npm run tools` " +
  "puts one in .tools/, which `toolgate serve` then starts as its embedded server";

/** What a connected server says about itself. */
export interface ServerFacts {
  readonly version: string;
  readonly serverName: string;
  readonly jetstream: boolean;
  readonly cluster?: string;
}

/** What toolgate makes of a server: a reason to stop, or warnings to log. */
export interface ServerVerdict {
  readonly refusal?: string;
  readonly warnings: string[];
}

/** A server toolgate must not run on; the message says what was found and what to do. */
export class UnsupportedServerError extends Error {
  override readonly name = "UnsupportedServerError";
}

/** Major, minor and patch of a server version ("2.15.3", "2.12.0-RC.1"), or null when it is not one. */
export function parseVersion(version: string): [number, number, number] | null {
  const m = /^v?(\d+)\.(\d+)\.(\d+)/.exec(version.trim());
  return m ? [Number(m[1]), Number(m[2]), Number(m[3])] : null;
}

/** Compares two versions (a missing patch is 0); an unparseable one sorts first. */
export function compareVersions(a: string, b: string): number {
  const pa = parseVersion(a.split(".").length === 2 ? `${a}.0` : a) ?? [-1, 0, 0];
  const pb = parseVersion(b.split(".").length === 2 ? `${b}.0` : b) ?? [-1, 0, 0];
  for (let i = 0; i < 3; i++) if (pa[i] !== pb[i]) return pa[i]! - pb[i]!;
  return 0;
}

export function serverFacts(nc: NatsConnection): ServerFacts {
  const info = nc.info;
  if (!info) throw new Error("not connected to a NATS server");
  return { version: info.version, serverName: info.server_name, jetstream: info.jetstream === true, cluster: info.cluster };
}

/** Judges a server for a gateway (or `streams apply`) that keeps `replicas` copies of each stream. */
export function judgeServer(facts: ServerFacts, options: { replicas: number }): ServerVerdict {
  const found = `nats-server ${facts.version} (${facts.serverName})`;
  if (parseVersion(facts.version) === null)
    return { warnings: [`${found}: cannot read its version; toolgate is tested on ${CURRENT_LINE}.x and ${OLDEST_MAINTAINED_LINE}.x`] };
  if (compareVersions(facts.version, OLDEST_SERVER) < 0) {
    return { refusal: `${found} is older than ${OLDEST_SERVER}, the oldest toolgate runs on: ${HOW_TO_UPGRADE}`, warnings: [] };
  }
  if (!facts.jetstream) {
    return { refusal: `${found} has JetStream disabled: start it with -js (or a \`jetstream {}\` block in its config)`, warnings: [] };
  }
  if (options.replicas > 1 && compareVersions(facts.version, OLDEST_REPLICATED_SERVER) < 0) {
    return {
      refusal:
        `${found} cannot keep replicated storage (${options.replicas} replicas asked): before ${OLDEST_REPLICATED_SERVER} a clustered ` +
        "stream checks a write's expected revision outside raft, so two updates of one key can both succeed (nats-io/nats-server#4320) " +
        `and toolgate would lose state changes. Upgrade every node of the cluster: ${HOW_TO_UPGRADE}`,
      warnings: [],
    };
  }
  const warnings: string[] = [];
  if (compareVersions(facts.version, OLDEST_MAINTAINED_LINE) < 0) {
    warnings.push(
      `${found} is on an end-of-life line (before ${OLDEST_MAINTAINED_LINE}): no fixes, not tested by toolgate's CI; fine for development on one server, not for production: ${HOW_TO_UPGRADE}`,
    );
  }
  return { warnings };
}

/**
 * Reads the connected server's facts, throws `UnsupportedServerError` when toolgate must not run on
 * it and hands each warning to `warn`. During a rolling upgrade each node is judged when connected to.
 */
export function requireSupportedServer(nc: NatsConnection, options: { replicas: number }, warn: (message: string, facts: ServerFacts) => void): ServerFacts {
  const facts = serverFacts(nc);
  const verdict = judgeServer(facts, options);
  if (verdict.refusal) throw new UnsupportedServerError(verdict.refusal);
  for (const w of verdict.warnings) warn(w, facts);
  return facts;
}

/**
 * Judges every server the connection moves to, as nodes restart in a rolling upgrade: logs the new
 * server's version and warnings, and closes the connection on a server toolgate must not use (the
 * gateway then exits 1, so its supervisor restarts it against the cluster again).
 */
export function judgeEachReconnect(nc: NatsConnection, options: { replicas: number }, log: Pick<Logger, "info" | "warn" | "error">): void {
  void (async () => {
    for await (const status of nc.status()) {
      if (status.type !== "reconnect") continue;
      const facts = serverFacts(nc);
      const verdict = judgeServer(facts, options);
      log.info({ nats_server: facts.version, server_name: facts.serverName }, "reconnected to NATS");
      for (const w of verdict.warnings) log.warn({ nats_server: facts.version }, w);
      if (verdict.refusal) {
        log.error({ nats_server: facts.version }, verdict.refusal);
        await nc.close();
      }
    }
  })();
}
