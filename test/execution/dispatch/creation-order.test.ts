import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { AssignmentRecord, RunRecord } from "../../../src/execution/model/records.js";
import { executionStores } from "../../../src/kv/buckets.js";
import type { VersionedStore } from "../../../src/kv/versioned-store.js";
import { ensureStreams, loadDefinitions } from "../../../src/streams/index.js";
import { STREAMS } from "../../../src/streams/names.js";
import { subjects } from "../../../src/wire/subjects.js";
import { startTestNats, storedOn, type TestNats } from "../../helpers/nats.js";
import { GatedStore } from "../../helpers/gated-store.js";
import { activeRun, bucketStore, oneReadTool, toolCallCreation } from "../../helpers/tool-call-creation.js";
import { until } from "../../helpers/until.js";
import { DirectReads } from "../../helpers/direct-reads.js";

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

  beforeAll(async () => {
    nats = await startTestNats();
    nc = await connect({ servers: nats.url });
    jsm = await jetstreamManager(nc);
    await ensureStreams(jsm, loadDefinitions(), { replicas: 1 });
  });
  afterAll(async () => {
    await nc?.close();
    await nats?.stop();
  });

  /** A creation over the given runs and assignments stores, and a run of its own. */
  const creation = async (given: { runs?: VersionedStore<RunRecord>; assignments?: VersionedStore<AssignmentRecord> }, runId: string) => {
    const { service, dispatcher } = await toolCallCreation(nc, oneReadTool("order.read", BINDING, SCOPE), given);
    const run = activeRun(runId, "order");
    await (await (await executionStores(nc))("runs", RunRecord)).put(runId, run);
    return { service, dispatcher, run };
  };
  const candidateCount = (): Promise<number> => storedOn(jsm, STREAMS.candidates, subjects.candidate(SCOPE, BINDING, "*"));

  it("publishes the candidate while the assignment's write is still under way", async () => {
    const store = await executionStores(nc);
    const assignments = await bucketStore(nc, GatedStore<AssignmentRecord>, "assignments", AssignmentRecord);
    const { service } = await creation({ assignments }, "run-order-1");
    const before = await candidateCount();
    const created = service.create("run-order-1", { tool_name: "order.read", arguments: {} });
    await until("the candidate, its assignment not yet written", async () => ((await candidateCount()) > before ? true : undefined));
    assignments.open();
    const { assignment } = await created;
    expect((await (await store("runs", RunRecord)).get("run-order-1"))?.value.assignment_ids).toEqual([assignment.assignment_id]);
  });

  it("a claim's listing check made while the creation lists the call waits for that listing: one listing, not two", async () => {
    const store = await executionStores(nc);
    const runs = await bucketStore(nc, GatedStore<RunRecord>, "runs", RunRecord);
    const { service, dispatcher, run } = await creation({ runs }, "run-order-2");
    const created = service.create("run-order-2", { tool_name: "order.read", arguments: {} });
    await until("the creation listing the call", () => (runs.mutations === 1 ? true : undefined));
    // One token: the assignments, not the watches beside them (`w.<id>`).
    const pending = await (await store("assignments", AssignmentRecord)).entries("*");
    const a = pending.map((e) => e.value).find((v) => v.run_id === "run-order-2")!;
    // The run as a claim on this process has it: not listing the call yet.
    const check = dispatcher.ensureListed(a, run);
    runs.open();
    expect(await check).toBe("listed");
    expect((await created).created).toBe(true);
    expect(runs.mutations).toBe(1);
    expect((await runs.get("run-order-2"))?.value.assignment_ids).toEqual([a.assignment_id]);
  });

  it("a claim's listing check made after the creation listed the call takes the listing this process remembers, without reading the run", async () => {
    // The gateway's runs store remembers what it wrote; a claim's run was taken before the listing (its candidate came first).
    const runs = (await (await executionStores(nc))("runs", RunRecord)).withRevisionCache(16);
    const { service, dispatcher, run } = await creation({ runs }, "run-order-3");
    const { assignment } = await service.create("run-order-3", { tool_name: "order.read", arguments: {} });
    const runReads = await DirectReads.of(nats.url, "tg_runs");
    try {
      const { value: listing, reads } = await runReads.during(() => dispatcher.ensureListed(assignment, run));
      expect(listing).toBe("listed");
      expect(reads).toBe(0);
    } finally {
      await runReads.close();
    }
  });
});
