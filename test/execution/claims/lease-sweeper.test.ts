import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstream, jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import { CandidateQueue } from "../../../src/execution/dispatch/candidate-queue.js";
import { Dispatcher } from "../../../src/execution/dispatch/dispatcher.js";
import { LeaseSweeper, type RunEnds } from "../../../src/execution/claims/lease-sweeper.js";
import type { AssignmentEvents } from "../../../src/execution/events/assignment-events.js";
import { Watchlist } from "../../../src/execution/claims/watchlist.js";
import { BackgroundTasks } from "../../../src/execution/tasks/background-tasks.js";
import { AssignmentRecord, RunRecord, WatchEntry, unstartedAssignment } from "../../../src/execution/model/records.js";
import type { ExecutorDetacher } from "../../../src/execution/operations/executor-detach.js";
import type { PresenceService } from "../../../src/execution/claims/presence.js";
import { executionStores } from "../../../src/kv/buckets.js";
import type { VersionedStore } from "../../../src/kv/versioned-store.js";
import { createLogger } from "../../../src/log/logger.js";
import { ensureStreams, loadDefinitions } from "../../../src/streams/index.js";
import { candidateConsumer, STREAMS } from "../../../src/streams/names.js";
import { decode } from "../../../src/wire/codec.js";
import { Candidate } from "../../../src/wire/messages.js";
import { startTestNats, type TestNats } from "../../helpers/nats.js";

/**
 * `LeaseSweeper.sweepOnce()` driven by an injected clock against a real nats-server (real KV, real
 * candidate stream): no timer runs and nothing sleeps; the clock is moved by the test.
 */
const SCOPE = "sweep";
const LEASE_MS = 30_000;
const REOFFER_MS = 60_000;
const GRACE_MS = 10_000;
const RUN = "run-sweep";

/** Collaborators the lease and re-offer paths never reach: touching one fails the test. */
const unreachable = <T extends object>(name: string): T =>
  new Proxy({} as T, {
    get: (_t, prop) => {
      throw new Error(`the sweeper reached ${name}.${String(prop)} on a lease or re-offer path`);
    },
  });

describe("the lease sweeper, on an injected clock", () => {
  let nats: TestNats;
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  let assignments: VersionedStore<AssignmentRecord>;
  let watches: VersionedStore<WatchEntry>;
  let watchlist: Watchlist;
  let candidates: CandidateQueue;
  let dispatcher: Dispatcher;
  let sweeper: LeaseSweeper;
  let clock = 1_700_000_000_000;
  const now = () => clock;
  let n = 0;

  beforeAll(async () => {
    nats = await startTestNats();
    nc = await connect({ servers: nats.url });
    jsm = await jetstreamManager(nc);
    await ensureStreams(jsm, loadDefinitions(), { replicas: 1 });
    const store = await executionStores(nc);
    const runs = await store("runs", RunRecord);
    assignments = await store("assignments", AssignmentRecord);
    watches = await store("watch", WatchEntry);
    // The watch bucket's place (store layout 5): the sweeper does the same wherever the watches are.
    watchlist = new Watchlist({ store: watches, prefix: "" });
    candidates = new CandidateQueue(nc, jsm, { replicas: 1, ackWaitMs: 30_000 });
    dispatcher = new Dispatcher(runs, assignments, candidates, watchlist, REOFFER_MS, GRACE_MS, now);
    const log = createLogger({ level: "silent" });
    const tasks = new BackgroundTasks(runs, assignments, watchlist, log, now);
    sweeper = new LeaseSweeper(
      assignments,
      watchlist,
      dispatcher,
      candidates,
      unreachable<PresenceService>("presence"),
      unreachable<ExecutorDetacher>("detacher"),
      tasks,
      unreachable<RunEnds>("runs"),
      unreachable<AssignmentEvents>("deferredEvents"),
      log,
      1_000,
      now,
    );
    await runs.put(RUN, {
      run_id: RUN,
      session_id: "s-sweep",
      agent: "sweeper",
      agent_version: "sweeper.1",
      toolset: "ts",
      toolset_version: "1",
      subject: "",
      state: "active",
      assignment_ids: [],
      created_at: clock,
      ended_at: null,
    });
  });
  afterEach(async () => {
    // Each case sweeps only its own assignment.
    for (const id of await watchlist.watchedIds()) await watchlist.release(id);
  });
  afterAll(async () => {
    await nc?.close();
    await nats?.stop();
  });

  /** A new read tool call of the run, not yet written. */
  const newCall = (id: string): AssignmentRecord =>
    ({
      assignment_id: id,
      run_id: RUN,
      tool_call_id: null,
      tool_name: "tasks.read",
      binding_id: "b-sweep",
      scope: SCOPE,
      tool_kind: "read",
      arguments: {},
      argument_digest: "0".repeat(64),
      operation_key: `op-${id}`,
      max_result_context_bytes: 4_096,
      ...unstartedAssignment(),
      compensates: null,
      created_at: clock,
      updated_at: clock,
    }) as AssignmentRecord;
  /** A new read tool call of the run, dispatched by the real path: pending, generation 0, its candidate in the stream, watched for a re-offer. */
  const dispatched = async (): Promise<AssignmentRecord> => {
    const id = `asg-sweep-${++n}`;
    await assignments.put(id, newCall(id));
    const a = await dispatcher.dispatch(id);
    expect(a).toMatchObject({ state: "pending", generation: 0, candidate_seq: null });
    expect((await candidates.find(a!))?.candidate).toMatchObject({ assignment_id: id, generation: 0 });
    return a!;
  };
  /** An executor takes the candidate of `id` (acknowledged: gone from the work queue); earlier cases' leftovers are taken on the way. */
  const take = async (id: string): Promise<Candidate> => {
    const consumer = await jetstream(nc).consumers.get(STREAMS.candidates, candidateConsumer(SCOPE));
    for (;;) {
      const m = await consumer.next({ expires: 5_000 });
      if (!m) throw new Error(`no candidate of ${id}`);
      await m.ackAck();
      const c = decode(Candidate, m.data);
      if (c.assignment_id === id) return c;
    }
  };
  /** Its claim, as the claim service writes it: claimed, leased until `clock + LEASE_MS`, watched at the lease's end. */
  const claimed = async (a: AssignmentRecord): Promise<AssignmentRecord> => {
    const claim = { executor_id: "exec-gone", generation: a.generation, token_sha256: "a".repeat(64), claimed_at: clock, lease_expires_at: clock + LEASE_MS };
    const res = await assignments.mutate(a.assignment_id, (cur) => ({ write: { ...cur, state: "claimed", claim, updated_at: clock }, result: undefined }));
    await watchlist.watch(a.assignment_id, claim.lease_expires_at);
    return res!.value;
  };
  const current = async (id: string) => (await assignments.get(id))!.value;
  const dueAt = async (id: string) => (await watches.get(id))?.value.due_at;

  it("returns an unconfirmed claim past its lease to the candidates with generation + 1", async () => {
    const a = await dispatched();
    await take(a.assignment_id);
    const held = await claimed(a);

    clock = held.claim!.lease_expires_at;
    await sweeper.sweepOnce();

    const after = await current(a.assignment_id);
    expect(after).toMatchObject({ state: "pending", generation: 1, claim: null, past_claims: [held.claim], candidate_seq: null });
    expect((await candidates.find(after))?.candidate).toMatchObject({ assignment_id: a.assignment_id, generation: 1 });
    // The new candidate is watched for its re-offer.
    expect(await dueAt(a.assignment_id)).toBe(clock + REOFFER_MS);
  });

  it("watches a claim whose watch came due before its lease again at the lease's end, and expires it there", async () => {
    const a = await dispatched();
    await take(a.assignment_id);
    const held = await claimed(a);
    // A watch older than the lease (as the claim service's holder check writes one) comes due first.
    await watchlist.watch(a.assignment_id, clock + 1_000);

    clock += 1_000;
    await sweeper.sweepOnce();
    expect(await current(a.assignment_id)).toMatchObject({ state: "claimed", generation: 0, claim: held.claim });
    expect(await dueAt(a.assignment_id)).toBe(held.claim!.lease_expires_at);

    clock = held.claim!.lease_expires_at - 1;
    await sweeper.sweepOnce();
    expect(await current(a.assignment_id)).toMatchObject({ state: "claimed", generation: 0 });

    clock = held.claim!.lease_expires_at;
    await sweeper.sweepOnce();
    expect(await current(a.assignment_id)).toMatchObject({ state: "pending", generation: 1, claim: null });
  });

  it("offers a candidate taken but never claimed again with the next generation", async () => {
    const a = await dispatched();
    expect(await take(a.assignment_id)).toMatchObject({ generation: 0 });

    clock += REOFFER_MS;
    await sweeper.sweepOnce();

    const after = await current(a.assignment_id);
    expect(after).toMatchObject({ state: "pending", generation: 1, claim: null });
    expect(await candidates.waiting(after, 1)).toBe(true);
    expect(await take(a.assignment_id)).toMatchObject({ generation: 1 });
  });

  it("offers a new call again when its first candidate, published without a PubAck, never reached the stream", async () => {
    // A creation whose candidate is lost on its way (the publish asks for no PubAck, so nothing tells it).
    class LostFirstOffer extends CandidateQueue {
      override async post(): Promise<void> {}
    }
    const runs = await (await executionStores(nc))("runs", RunRecord);
    const creating = new Dispatcher(runs, assignments, new LostFirstOffer(nc, jsm, { replicas: 1, ackWaitMs: 30_000 }), watchlist, REOFFER_MS, GRACE_MS, now);
    const id = `asg-sweep-lost-${++n}`;
    const record = newCall(id);
    await creating.watchCreation(id, record.created_at);
    const created = await creating.create(record, (await runs.get(RUN))!);
    expect(created).toMatchObject({ created: true, assignment: { state: "pending", generation: 0 } });
    expect(await candidates.find(record)).toBeNull();

    // Its creation watch comes due: no candidate of generation 0 will ever reach an executor.
    clock = record.created_at + GRACE_MS;
    await sweeper.sweepOnce();
    const after = await current(id);
    expect(after).toMatchObject({ state: "pending", generation: 1, claim: null });
    expect(await take(id)).toMatchObject({ generation: 1 });
  });

  it("keeps the watch of a creation whose assignment is missing for a minute past its time (a slow creation still lands under it)", async () => {
    const id = `asg-sweep-missing-${++n}`;
    await watchlist.watch(id, clock);
    await sweeper.sweepOnce();
    expect(await dueAt(id)).toBe(clock);
    clock += 59_999;
    await sweeper.sweepOnce();
    expect(await dueAt(id)).toBeDefined();
    clock += 1;
    await sweeper.sweepOnce();
    expect(await dueAt(id)).toBeUndefined();
  });

  it("looks after a claim that relied on its offer's watch: the lease's end, then the expiry", async () => {
    const a = await dispatched();
    // A first offer's watch keeps its creation's due time (what a claim made before then relies on).
    expect(await dueAt(a.assignment_id)).toBe(a.created_at + GRACE_MS);
    expect(dispatcher.standingWatchDue(a)).toBe(a.created_at + GRACE_MS);
    await take(a.assignment_id);
    const claim = { executor_id: "exec-gone", generation: 0, token_sha256: "b".repeat(64), claimed_at: clock, lease_expires_at: clock + LEASE_MS };
    await assignments.mutate(a.assignment_id, (cur) => ({ write: { ...cur, state: "claimed", claim, updated_at: clock }, result: undefined }));

    clock = a.created_at + GRACE_MS;
    await sweeper.sweepOnce();
    expect(await dueAt(a.assignment_id)).toBe(claim.lease_expires_at);
    clock = claim.lease_expires_at;
    await sweeper.sweepOnce();
    expect(await current(a.assignment_id)).toMatchObject({ state: "pending", generation: 1, claim: null });
    expect(dispatcher.standingWatchDue(await current(a.assignment_id))).toBeNull();
  });

  it("only watches a candidate still waiting in the stream again, one re-offer period later", async () => {
    const a = await dispatched();

    clock += REOFFER_MS;
    await sweeper.sweepOnce();

    expect(await current(a.assignment_id)).toMatchObject({ state: "pending", generation: 0 });
    expect(await candidates.waiting(a, 0)).toBe(true);
    expect(await dueAt(a.assignment_id)).toBe(clock + REOFFER_MS);
    // Nothing is due before then: a sweep meanwhile leaves it alone.
    clock += REOFFER_MS - 1;
    await sweeper.sweepOnce();
    expect(await current(a.assignment_id)).toMatchObject({ generation: 0 });
  });
});
