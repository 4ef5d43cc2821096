import type { NatsConnection } from "@nats-io/transport-node";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { Kvm, type KV } from "@nats-io/kv";
import type { z } from "zod";
import type { ResolvedTool } from "../../src/config/schemas.js";
import { CandidateQueue } from "../../src/execution/dispatch/candidate-queue.js";
import { Dispatcher } from "../../src/execution/dispatch/dispatcher.js";
import { AssignmentRecord, RunRecord } from "../../src/execution/model/records.js";
import { ToolCallService, type ToolResolver } from "../../src/execution/runs/tool-calls.js";
import { executionStores, openBucket, type BucketRole } from "../../src/kv/buckets.js";
import type { BucketAccess, VersionedStore } from "../../src/kv/versioned-store.js";
import { EXECUTION_BUCKETS } from "../../src/streams/names.js";
import { watchlistOn, watchReader } from "./watches.js";
import type { Watchlist } from "../../src/execution/claims/watchlist.js";

/** A store of one execution bucket of another class than the gateway's (one that dies, or waits), on its own handle. */
export async function bucketStore<T, S extends VersionedStore<T>>(
  nc: NatsConnection,
  Store: new (kv: KV, schema: z.ZodType<T>, access: BucketAccess) => S,
  role: BucketRole,
  schema: z.ZodType<T>,
): Promise<S> {
  const jsm = await jetstreamManager(nc);
  const bucket = EXECUTION_BUCKETS[role];
  return new Store(await openBucket(new Kvm(nc), jsm, bucket), schema, { bucket, nc, js: jetstream(nc), jsm });
}

/**
 * The tool-call creation of a process of its own (another gateway's, as far as the stores go), over
 * the stores and the candidate queue given, the others opened afresh: the same watch, dispatch and
 * grace times in every test that uses it.
 */
export async function toolCallCreation(
  nc: NatsConnection,
  tools: ToolResolver,
  given: { runs?: VersionedStore<RunRecord>; assignments?: VersionedStore<AssignmentRecord>; candidates?: CandidateQueue; watchlist?: Watchlist } = {},
): Promise<{ service: ToolCallService; dispatcher: Dispatcher; watchOf: Awaited<ReturnType<typeof watchReader>> }> {
  const store = await executionStores(nc);
  const runs = given.runs ?? (await store("runs", RunRecord));
  const assignments = given.assignments ?? (await store("assignments", AssignmentRecord));
  const watchlist = given.watchlist ?? (await watchlistOn(nc));
  const candidates = given.candidates ?? new CandidateQueue(nc, await jetstreamManager(nc), { replicas: 1, ackWaitMs: 30_000 });
  const dispatcher = new Dispatcher(runs, assignments, candidates, watchlist, 60_000, 10_000);
  return {
    service: new ToolCallService(runs, assignments, tools, dispatcher, watchlist, () => nc.info!.max_payload),
    dispatcher,
    watchOf: await watchReader(nc),
  };
}

/** A resolver that knows one read tool, whatever the session: for a creation without a configuration store. */
export function oneReadTool(name: string, bindingId: string, scope: string): ToolResolver {
  const resolved = {
    tool: { name, input_schema: { type: "object" }, max_result_context_bytes: 4_096 },
    binding: { binding_id: bindingId, executor_scope: scope, tool_kind: "read" },
  };
  return { resolveTool: async () => resolved as unknown as ResolvedTool };
}

/** An active run of nobody's session, listing no call yet. */
export function activeRun(runId: string, agent: string): RunRecord {
  return {
    run_id: runId,
    session_id: `s-${agent}`,
    agent,
    agent_version: `${agent}.1`,
    toolset: "ts",
    toolset_version: "1",
    subject: "",
    state: "active",
    assignment_ids: [],
    created_at: Date.now(),
    ended_at: null,
  };
}
