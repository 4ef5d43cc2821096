/**
 * Messages through nats-server, counted by the server itself (its monitoring endpoint `/connz`):
 * how many messages each kind of client sent and received. On a machine where a syscall is dear,
 * messages (each one a read or a write somewhere) are what a call's CPU follows.
 */

interface ConnzEntry {
  cid: number;
  name?: string;
  in_msgs: number;
  out_msgs: number;
}

/**
 * The role of a connection, from the name its client gave it: the gateway (`toolgate-gateway@host`, the
 * floor's `bench-gateway-…`),
 * toolgate's executors (`toolgate-runner:…`, `bench-executor-…`), a peer's workers (`bench-worker-…`),
 * the process making the calls (`bench-producer…`, `bench-completion-watch`), else `other`.
 */
export function roleOf(name: string | undefined): string {
  if (!name) return "other";
  if (name.startsWith("toolgate-gateway") || name.startsWith("bench-gateway")) return "gateway";
  if (name.startsWith("toolgate-runner") || name.startsWith("bench-executor")) return "executors";
  if (name.startsWith("bench-worker")) return "workers";
  if (name.startsWith("bench-producer")) return "producer";
  return "other";
}

/** The name of the connection the bench driver reads stream counts on. */
export const BENCH_DRIVER_CONNECTION = "bench-driver";

/**
 * The toolgate producer's watch for completed calls: how the bench learns a call is done, no part
 * of the call (it watches two buckets so that every store layout is timed to the same point).
 */
export const BENCH_COMPLETION_CONNECTION = "bench-completion-watch";

/**
 * Messages so far, `<role> in` (published by the role's clients) and `<role> out` (delivered to them),
 * summed over open and closed connections (the server keeps the last ones it closed), so that a client
 * that reconnected is not lost from the sum.
 */
export async function trafficTotals(monitorUrl: string): Promise<Map<string, number>> {
  const connections = new Map<number, ConnzEntry>();
  for (const state of ["open", "closed"]) {
    const res = await fetch(`${monitorUrl}/connz?state=${state}&limit=4096`);
    if (!res.ok) throw new Error(`nats-server monitoring ${res.status}: start it with -m <port>`);
    const body = (await res.json()) as { connections?: ConnzEntry[] };
    for (const c of body.connections ?? []) connections.set(c.cid, c);
  }
  const out = new Map<string, number>();
  for (const c of connections.values()) {
    // The bench's own connections (stream counts between levels, the completion watch) are no part of any call.
    if (c.name === BENCH_DRIVER_CONNECTION || c.name === BENCH_COMPLETION_CONNECTION) continue;
    const role = roleOf(c.name);
    out.set(`${role} in`, (out.get(`${role} in`) ?? 0) + c.in_msgs);
    out.set(`${role} out`, (out.get(`${role} out`) ?? 0) + c.out_msgs);
  }
  return out;
}
