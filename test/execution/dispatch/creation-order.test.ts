import { z } from "zod";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import type { ResolvedTool } from "../../../src/config/schemas.js";
import { CandidateQueue } from "../../../src/execution/dispatch/candidate-queue.js";
import { Dispatcher } from "../../../src/execution/dispatch/dispatcher.js";
import { Watchlist } from "../../../src/execution/claims/watchlist.js";
import { AssignmentRecord, RunRecord, WatchEntry } from "../../../src/execution/model/records.js";
import { ToolCallService } from "../../../src/execution/runs/tool-calls.js";
import { executionStores, openBucket } from "../../../src/kv/buckets.js";
import type { VersionedStore } from "../../../src/kv/versioned-store.js";
import { ensureStreams, loadDefinitions } from "../../../src/streams/index.js";
import { EXECUTION_BUCKETS, STREAMS } from "../../../src/streams/names.js";
import { subjects } from "../../../src/wire/subjects.js";
import { startTestNats, type TestNats } from "../../helpers/nats.js";
import { GatedStore } from "../../helpers/gated-store.js";
import { until } from "../../helpers/until.js";

const SCOPE = "order";
const BINDING = "b-order";

/**
 * A new tool call's candidate is published beside its assignment's write (an executor can take it
 * one round trip sooner), and the call is listed on its run after that write; a claim this process
 * handles meanwhile waits for that listing instead of writing a second one.
 */
describe("a tool call's creation", () => {
  let nats: TestNats;
  let nc: NatsConnection;
  let jsm: Awaited<ReturnType<typeof jetstreamManager>>;
  let kvm: Kvm;

  beforeAll(async () => {
    nats = await startTestNats();
    nc = await connect({ servers: nats.url });
    jsm = await jetstreamManager(nc);
    kvm = new Kvm(nc);
    await ensureStreams(jsm, loadDefinitions(), { replicas: 1 });
  });
  afterAll(async () => {
    await nc?.close();
    await nats?.stop();
  });

  const gated = async <T>(bucket: keyof typeof EXECUTION_BUCKETS, schema: z.ZodType<T>) =>
    new GatedStore<T>(await openBucket(kvm, jsm, EXECUTION_BUCKETS[bucket]), schema, { bucket: EXECUTION_BUCKETS[bucket], js: jetstream(nc), jsm });

  /** A creation service over the given runs and assignments stores, and a run of its own. */
  const creation = async (runs: VersionedStore<RunRecord>, assignments: VersionedStore<AssignmentRecord>, runId: string) => {
    const store = await executionStores(nc);
    const watchlist = new Watchlist(await store("watch", WatchEntry));
    const dispatcher = new Dispatcher(runs, assignments, new CandidateQueue(jetstream(nc), jsm, { replicas: 1, ackWaitMs: 30_000 }), watchlist, 60_000, 10_000);
    const tool = {
      tool: { name: "order.read", input_schema: { type: "object" }, max_result_context_bytes: 4_096 },
      binding: { binding_id: BINDING, executor_scope: SCOPE, tool_kind: "read" },
    };
    const service = new ToolCallService(runs, assignments, { resolveTool: async () => tool as unknown as ResolvedTool }, dispatcher, watchlist);
    const run: RunRecord = {
      run_id: runId,
      session_id: "s-order",
      agent: "order",
      agent_version: "order.1",
      toolset: "ts",
      toolset_version: "1",
      subject: "",
      state: "active",
      assignment_ids: [],
      created_at: Date.now(),
      ended_at: null,
    };
    await (await store("runs", RunRecord)).put(runId, run);
    return { service, dispatcher, run };
  };
  const candidateCount = async (): Promise<number> =>
    (await jsm.streams.info(STREAMS.candidates, { subjects_filter: subjects.candidate(SCOPE, BINDING, "*") })).state.messages;

  it("publishes the candidate while the assignment's write is still under way", async () => {
    const store = await executionStores(nc);
    const assignments = await gated<AssignmentRecord>("assignments", AssignmentRecord);
    const { service } = await creation(await store("runs", RunRecord), assignments, "run-order-1");
    const before = await candidateCount();
    const created = service.create("run-order-1", { tool_name: "order.read", arguments: {} });
    await until("the candidate, its assignment not yet written", async () => ((await candidateCount()) > before ? true : undefined));
    assignments.open();
    const { assignment } = await created;
    expect((await (await store("runs", RunRecord)).get("run-order-1"))?.value.assignment_ids).toEqual([assignment.assignment_id]);
  });

  it("a claim's listing check made while the creation lists the call waits for that listing: one listing, not two", async () => {
    const store = await executionStores(nc);
    const runs = await gated<RunRecord>("runs", RunRecord);
    const { service, dispatcher, run } = await creation(runs, await store("assignments", AssignmentRecord), "run-order-2");
    const created = service.create("run-order-2", { tool_name: "order.read", arguments: {} });
    await until("the creation listing the call", () => (runs.mutations === 1 ? true : undefined));
    const pending = await (await store("assignments", AssignmentRecord)).entries();
    const a = pending.map((e) => e.value).find((v) => v.run_id === "run-order-2")!;
    // The run as a claim on this process has it: not listing the call yet.
    const check = dispatcher.ensureListed(a, run);
    runs.open();
    expect(await check).toBe("listed");
    expect((await created).created).toBe(true);
    expect(runs.mutations).toBe(1);
    expect((await runs.get("run-order-2"))?.value.assignment_ids).toEqual([a.assignment_id]);
  });
});
