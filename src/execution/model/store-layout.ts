/**
 * What a gateway writes where, by store layout; every gateway of this release reads them all. A
 * release reads only the layouts up to the one it introduced, so a cluster stays on the layout its
 * oldest gateway reads until every gateway runs a release that reads the next
 * (`TOOLGATE_STORE_LAYOUT`):
 * - 1: a completed call's projection is an entry of the projections bucket, written after the
 *   compare-and-set that completed the call;
 * - 2: that compare-and-set carries the projection in the assignment record (one write and one round
 *   trip fewer per call);
 * - 3: as 2, and a progress receipt under its claim-bound id (`receiptId`) is indexed by its own
 *   progress entry instead of an entry of the receipt index (one write and one round trip fewer per
 *   progress report);
 * - 4: as 3, and a progress report is recorded by a compare-and-set of its assignment, which
 *   carries it in the record (`progress_log`) and indexes its receipt: no progress entry is written,
 *   and the report is decided on the value this gateway last wrote (no read first), as `accepted`
 *   and `completed` are. A report that would make the record too large is an entry of the bucket.
 * - 5: as 4, and the run events one write means are one message of the event stream when there are
 *   several (a msgpack array): a progress report applied together with the final receipt costs one
 *   event message instead of two. Earlier layouts publish one message per event.
 * - 6: as 5, and the lease sweeper's watches are keys of the assignments bucket (`w.<assignment>`,
 *   `w.end.<run>`) instead of entries of the watch bucket. A tool call's creation then publishes its
 *   watch right before its assignment on the same connection, without waiting for the watch's reply:
 *   the server stores one connection's messages to one stream in their order, so an assignment
 *   stored has its watch stored before it. One round trip fewer before the call's candidate goes
 *   out. A gateway of this release reads watches in both places whatever it writes, and moves those
 *   it finds in the other place to its own (`Watchlist`).
 * - 7: as 6, and the run events of a tool call's creation and of a claim wait in the assignment record
 *   (`deferred_events`) for its next write, which publishes them before its own in one event message
 *   (or the gateway that wrote them publishes them a moment later, if no write came): a read with one
 *   progress report is one event message instead of three.
 */
export type StoreLayout = 1 | 2 | 3 | 4 | 5 | 6 | 7;

export const STORE_LAYOUTS = [1, 2, 3, 4, 5, 6, 7] as const satisfies readonly StoreLayout[];

/** The layout of this release, and the default. */
export const CURRENT_STORE_LAYOUT: StoreLayout = 7;
