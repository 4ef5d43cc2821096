import type { NatsConnection } from "@nats-io/transport-node";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { executionStores } from "../../src/kv/buckets.js";
import type { VersionedStore } from "../../src/kv/versioned-store.js";
import { RunEventLog } from "../../src/execution/events/event-log.js";
import { ProgressStore } from "../../src/execution/receipts/progress-store.js";
import { ProjectionStore } from "../../src/execution/receipts/projection-store.js";
import { ReceiptIndex } from "../../src/execution/receipts/receipt-index.js";
import { ReceiptLog } from "../../src/execution/receipts/receipt-log.js";
import { BackgroundTasks } from "../../src/execution/tasks/background-tasks.js";
import { ReceiptProcessor } from "../../src/execution/receipts/receipt-processor.js";
import { AssignmentRecord, ProgressEntry, ProjectionRecord, ReceiptIndexEntry, RunRecord } from "../../src/execution/model/records.js";
import type { Watchlist } from "../../src/execution/claims/watchlist.js";
import { watchlistOn } from "./watches.js";
import type { ExecutionMetrics } from "../../src/metrics/metrics.js";
import { createLogger } from "../../src/log/logger.js";
import { CURRENT_STORE_LAYOUT, type StoreLayout } from "../../src/execution/model/store-layout.js";

/**
 * A receipt processor of the execution path's own parts on a gateway's buckets: another gateway,
 * for a test that hands it messages itself (a redelivery, a receipt processed late).
 */
export async function processorOnSameBuckets(
  nc: NatsConnection,
  own: {
    assignments?: VersionedStore<AssignmentRecord>;
    watchlist?: Watchlist;
    metrics?: Pick<ExecutionMetrics, "receiptIndexLookup">;
    now?: () => number;
    layout?: StoreLayout;
  } = {},
): Promise<ReceiptProcessor> {
  const store = await executionStores(nc);
  const assignments = own.assignments ?? (await store("assignments", AssignmentRecord));
  const runs = await store("runs", RunRecord);
  const watchlist = own.watchlist ?? (await watchlistOn(nc, own.layout));
  const log = createLogger({ level: "silent" });
  const layout = own.layout ?? CURRENT_STORE_LAYOUT;
  const progress = new ProgressStore(await store("progress", ProgressEntry), layout);
  return new ReceiptProcessor({
    runs,
    assignments,
    index: new ReceiptIndex(await store("receiptIndex", ReceiptIndexEntry), assignments, progress),
    progress,
    events: new RunEventLog(nc, jetstream(nc), log, layout),
    projections: new ProjectionStore(
      await store("projections", ProjectionRecord),
      new ReceiptLog(await jetstreamManager(nc)),
      layout,
      () => nc.info!.max_payload,
    ),
    watchlist,
    tasks: new BackgroundTasks(runs, assignments, watchlist, log),
    log,
    dedupWindowMs: 120_000,
    ...(own.metrics ? { metrics: own.metrics } : {}),
    ...(own.now ? { now: own.now } : {}),
  });
}
