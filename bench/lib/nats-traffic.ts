/**
 * Messages through nats-server, counted by the server itself (its monitoring endpoint `/connz`):
 * how many messages each kind of client sent and received. On a machine where a syscall is dear,
 * messages (each one a read or a write somewhere) are what a call's CPU follows.
 */

/** Messages in (published by the client) and out (delivered to it), summed over the connections of one role. */
export interface Traffic {
  readonly in: number;
  readonly out: number;
}

export type TrafficByRole = ReadonlyMap<string, Traffic>;

interface ConnzEntry {
  cid: number;
  name?: string;
  in_msgs: number;
  out_msgs: number;
}

/**
 * The role of a connection, from the name its client gave it: the gateway (`toolgate-gateway@host`),
 * the executors (`toolgate-runner:…`, `bench-executor-…`), the driver (`bench-…`), else `other`.
 */
export function roleOf(name: string | undefined): string {
  if (!name) return "other";
  if (name.startsWith("toolgate-gateway")) return "gateway";
  if (name.startsWith("toolgate-runner") || name.startsWith("bench-executor")) return "executors";
  if (name.startsWith("bench-")) return "driver";
  return "other";
}

/**
 * Per-connection counters, closed connections included (the server keeps the last ones it closed),
 * so that a client that reconnected is not lost from the sum.
 */
export async function trafficSnapshot(monitorUrl: string): Promise<Map<number, ConnzEntry>> {
  const out = new Map<number, ConnzEntry>();
  for (const state of ["open", "closed"]) {
    const res = await fetch(`${monitorUrl}/connz?state=${state}&limit=4096`);
    if (!res.ok) throw new Error(`nats-server monitoring ${res.status}: start it with -m <port>`);
    const body = (await res.json()) as { connections?: ConnzEntry[] };
    for (const c of body.connections ?? []) out.set(c.cid, c);
  }
  return out;
}

/** Messages per role between two snapshots. */
export function trafficBetween(before: Map<number, ConnzEntry>, after: Map<number, ConnzEntry>): TrafficByRole {
  const out = new Map<string, { in: number; out: number }>();
  for (const [cid, c] of after) {
    const was = before.get(cid);
    const role = roleOf(c.name);
    const sum = out.get(role) ?? { in: 0, out: 0 };
    sum.in += c.in_msgs - (was?.in_msgs ?? 0);
    sum.out += c.out_msgs - (was?.out_msgs ?? 0);
    out.set(role, sum);
  }
  return out;
}
