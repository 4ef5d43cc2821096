import type { JetStreamManager } from "@nats-io/jetstream";

/** `last_seq` of every stream (KV buckets are streams `KV_<bucket>`): each persisted message, put or delete marker, takes one. */
export type StreamSeqs = ReadonlyMap<string, number>;

export async function streamSeqs(jsm: JetStreamManager): Promise<StreamSeqs> {
  const out = new Map<string, number>();
  for await (const info of jsm.streams.list()) out.set(info.config.name, info.state.last_seq);
  return out;
}

/** Messages persisted per stream between two snapshots (streams with none are left out). */
export function writesBetween(before: StreamSeqs, after: StreamSeqs): Map<string, number> {
  const out = new Map<string, number>();
  for (const [name, seq] of after) {
    const n = seq - (before.get(name) ?? 0);
    if (n > 0) out.set(name, n);
  }
  return out;
}

/** Waits until no stream grows for `quietMs` (the last receipts' index entries land after their call is observed done). */
export async function settledSeqs(jsm: JetStreamManager, quietMs = 300, timeoutMs = 10_000): Promise<StreamSeqs> {
  const deadline = Date.now() + timeoutMs;
  let last = await streamSeqs(jsm);
  for (;;) {
    await new Promise((r) => setTimeout(r, quietMs));
    const now = await streamSeqs(jsm);
    if (writesBetween(last, now).size === 0 || Date.now() > deadline) return now;
    last = now;
  }
}
