import type { NatsConnection } from "@nats-io/transport-node";
import { openWatchlist, type Watchlist } from "../../src/execution/claims/watchlist.js";
import { WatchEntry } from "../../src/execution/model/records.js";
import { CURRENT_STORE_LAYOUT, type StoreLayout } from "../../src/execution/model/store-layout.js";
import { executionStores } from "../../src/kv/buckets.js";
import type { Versioned } from "../../src/kv/versioned-store.js";
import { ASSIGNMENT_BUCKET_WATCH_PREFIX, EXECUTION_BUCKETS } from "../../src/streams/names.js";

/**
 * Where a gateway of this release (store layout 6) keeps a watch: `key` is an assignment id, or
 * `end.<run>` for a run's end. Its key in the assignments bucket, and the subject it is written on.
 */
export const watchKey = (key: string): string => `${ASSIGNMENT_BUCKET_WATCH_PREFIX}${key}`;
export const watchSubject = (key: string): string => `$KV.${EXECUTION_BUCKETS.assignments}.${watchKey(key)}`;

/** Reads the watch of `key` as a gateway of this release keeps it (null when there is none). */
export async function watchReader(nc: NatsConnection): Promise<(key: string) => Promise<Versioned<WatchEntry> | null>> {
  const watches = await (await executionStores(nc))("assignments", WatchEntry);
  return (key) => watches.get(watchKey(key));
}

/** The watchlist a gateway writing store layout `layout` keeps, on `nc`'s buckets (a process of its own, as far as the stores go). */
export async function watchlistOn(nc: NatsConnection, layout: StoreLayout = CURRENT_STORE_LAYOUT): Promise<Watchlist> {
  return openWatchlist(await executionStores(nc), layout);
}
