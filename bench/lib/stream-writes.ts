import type { JetStreamManager } from "@nats-io/jetstream";
import { countersBetween } from "./systems/system.js";

/** `last_seq` of every stream (KV buckets are streams `KV_<bucket>`): each persisted message, put or delete marker, takes one. */
export type StreamSeqs = ReadonlyMap<string, number>;

export async function streamSeqs(jsm: JetStreamManager): Promise<StreamSeqs> {
  const out = new Map<string, number>();
  for await (const info of jsm.streams.list()) out.set(info.config.name, info.state.last_seq);
  return out;
}

/**
 * Waits until no stream grows for `quietMs` (toolgate's last index entries land after its call is
 * observed done). Not counted by `last_seq`: consumer acknowledgement state and work-queue removals
 * (disk I/O that takes no sequence).
 */
export async function settledSeqs(jsm: JetStreamManager, quietMs = 300, timeoutMs = 10_000): Promise<StreamSeqs> {
  const deadline = Date.now() + timeoutMs;
  let last = await streamSeqs(jsm);
  for (;;) {
    await new Promise((r) => setTimeout(r, quietMs));
    const now = await streamSeqs(jsm);
    if (countersBetween(last, now).size === 0 || Date.now() > deadline) return now;
    last = now;
  }
}
