import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { CandidateQueue } from "../../../src/execution/dispatch/candidate-queue.js";
import { Dispatcher } from "../../../src/execution/dispatch/dispatcher.js";
import { Watchlist } from "../../../src/execution/claims/watchlist.js";
import { AssignmentRecord, RunRecord, WatchEntry } from "../../../src/execution/model/records.js";
import { assignmentIdFor } from "../../../src/execution/model/ids.js";
import { ToolCallService } from "../../../src/execution/runs/tool-calls.js";
import { executionStores, openBucket } from "../../../src/kv/buckets.js";
import { EXECUTION_BUCKETS, STREAMS } from "../../../src/streams/names.js";
import { subjects } from "../../../src/wire/subjects.js";
import { GatedStore } from "../../helpers/gated-store.js";
import { until } from "../../helpers/until.js";
import { startExecutionFixture, type ExecutionFixture } from "../../helpers/execution-gateway.js";

const SCOPE = "early";

/**
 * A tool call's candidate is published beside its assignment's write, and the two land in different
 * streams, so an executor can claim before the assignment is there. Here another gateway creates the
 * call and its assignment's write is held back: the claim, made on the fixture's gateway, looks again
 * a moment later instead of refusing `not_found` (which would leave the call to a sweeper's re-offer).
 */
describe("a claim that arrives before its assignment's write", () => {
  let fx: ExecutionFixture;
  let assignments: GatedStore<AssignmentRecord>;
  let otherGateway: ToolCallService;

  beforeAll(async () => {
    fx = await startExecutionFixture({
      scope: SCOPE,
      agent: "early-bot",
      tools: [{ name: "e.read", binding_id: "b-early" }],
      executor: { id: "exec-early", start: "heartbeat" },
    });
    const store = await executionStores(fx.nc);
    const js = jetstream(fx.nc);
    const jsm = await jetstreamManager(fx.nc);
    const bucket = EXECUTION_BUCKETS.assignments;
    assignments = new GatedStore(await openBucket(new Kvm(fx.nc), jsm, bucket), AssignmentRecord, { bucket, js, jsm });
    const runs = await store("runs", RunRecord);
    const watchlist = new Watchlist(await store("watch", WatchEntry));
    const dispatcher = new Dispatcher(runs, assignments, new CandidateQueue(js, jsm, { replicas: 1, ackWaitMs: 30_000 }), watchlist, 60_000, 10_000);
    otherGateway = new ToolCallService(runs, assignments, fx.gw.gateway.store, dispatcher, watchlist);
  });
  afterAll(async () => {
    await fx?.close();
  });

  it("is granted once the write lands", async () => {
    const runId = (await fx.gw.api("POST", `/v1/sessions/${fx.sessionId}/runs`)).run_id;
    const created = otherGateway.create(runId, { tool_name: "e.read", arguments: {}, tool_call_id: "tc-early" });
    const id = assignmentIdFor(runId, "tc-early");
    const jsm = await jetstreamManager(fx.nc);
    await until("the candidate, its assignment held back", async () =>
      (await jsm.streams.getMessage(STREAMS.candidates, { last_by_subj: subjects.candidate(SCOPE, "b-early", id) })) ? true : undefined,
    );
    const claim = fx.executor.claim(id, 0);
    // Inside the claim's second look (50 ms): its first read finds nothing.
    setTimeout(() => assignments.open(), 25);
    expect(await claim).toMatchObject({ status: "granted", grant: { assignment_id: id } });
    expect((await created).created).toBe(true);
  });
});
