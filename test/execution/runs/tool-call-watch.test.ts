import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { CandidateQueue } from "../../../src/execution/dispatch/candidate-queue.js";
import { AssignmentRecord, RunRecord } from "../../../src/execution/model/records.js";
import { ToolCallService } from "../../../src/execution/runs/tool-calls.js";
import { executionStores } from "../../../src/kv/buckets.js";
import type { VersionedStore } from "../../../src/kv/versioned-store.js";
import { ensureStreams, loadDefinitions } from "../../../src/streams/index.js";
import type { Candidate } from "../../../src/wire/messages.js";
import { activeRun, oneReadTool, toolCallCreation } from "../../helpers/tool-call-creation.js";
import { watchlistOn } from "../../helpers/watches.js";
import { until } from "../../helpers/until.js";
import { startTestNats, type TestNats } from "../../helpers/nats.js";

/**
 * The creation's watch is the one a claim made soon after relies on, so the creating request must
 * never take it back from an assignment that was offered, even one an executor claimed before the
 * request finished (the record then says `claimed` while the request still holds it `pending`): here
 * a claim is written the moment the candidate is published, through real KV and a real candidate stream.
 */
const SCOPE = "fast";
const RUN = "run-fast";

/** A candidate queue whose every publish is followed at once by a claim of the assignment (a fast executor). */
class ClaimedOnPublish extends CandidateQueue {
  assignments!: VersionedStore<AssignmentRecord>;

  override async publish(scope: string, candidate: Candidate): Promise<number> {
    const seq = await super.publish(scope, candidate);
    await this.claimed(candidate);
    return seq;
  }

  /** A new call's first offer, published without its PubAck. */
  override async post(scope: string, candidate: Candidate): Promise<void> {
    await super.post(scope, candidate);
    await this.claimed(candidate);
  }

  private async claimed(candidate: Candidate): Promise<void> {
    const claim = {
      executor_id: "exec-fast",
      generation: candidate.generation,
      token_sha256: "c".repeat(64),
      claimed_at: Date.now(),
      lease_expires_at: Date.now() + 30_000,
    };
    // As a claim on the creating gateway does, it waits for the assignment's write (the candidate may be stored first).
    await until(
      "the assignment's write, to claim it",
      () =>
        this.assignments
          .mutate(candidate.assignment_id, (cur) => ({
            write: { ...cur, state: "claimed", claim, updated_at: Date.now() },
            result: undefined,
          }))
          .then((res) => res ?? undefined),
      5_000,
      5,
    );
  }
}

describe("a tool call claimed before its creating request finished", () => {
  let nats: TestNats;
  let nc: NatsConnection;
  let service: ToolCallService;
  let watchOf: Awaited<ReturnType<typeof toolCallCreation>>["watchOf"];
  let assignments: VersionedStore<AssignmentRecord>;

  beforeAll(async () => {
    nats = await startTestNats();
    nc = await connect({ servers: nats.url });
    const jsm = await jetstreamManager(nc);
    await ensureStreams(jsm, loadDefinitions(), { replicas: 1 });
    assignments = await (await executionStores(nc))("assignments", AssignmentRecord);
    const candidates = new ClaimedOnPublish(nc, jsm, { replicas: 1, ackWaitMs: 30_000 });
    candidates.assignments = assignments;
    ({ service, watchOf } = await toolCallCreation(nc, oneReadTool("fast.read", "b-fast", SCOPE), { assignments, candidates }));
    await (await (await executionStores(nc))("runs", RunRecord)).put(RUN, activeRun(RUN, "fast"));
  });
  afterAll(async () => {
    await nc?.close();
    await nats?.stop();
  });

  it("keeps the creation's watch: the claim relies on it for its lease and its holder", async () => {
    const { assignment, created } = await service.create(RUN, { tool_name: "fast.read", arguments: {} });
    expect(created).toBe(true);
    expect((await assignments.get(assignment.assignment_id))?.value).toMatchObject({ state: "claimed", candidate_seq: null });
    const watch = await watchOf(assignment.assignment_id);
    expect(watch?.value).toEqual({ assignment_id: assignment.assignment_id, due_at: assignment.created_at + 10_000 });
  });
});

/**
 * Store layout 6: the creation's watch is a key of the assignments' own stream, and the assignment
 * is published right behind it without waiting for its reply. The server stores one connection's
 * messages to one stream in their order, so the watch is stored first.
 */
describe("a tool call's creation under store layout 6", () => {
  let nats: TestNats;
  let nc: NatsConnection;

  beforeAll(async () => {
    nats = await startTestNats();
    nc = await connect({ servers: nats.url });
    await ensureStreams(await jetstreamManager(nc), loadDefinitions(), { replicas: 1 });
    await (await (await executionStores(nc))("runs", RunRecord)).put("run-pipelined", activeRun("run-pipelined", "pipelined"));
  });
  afterAll(async () => {
    await nc?.close();
    await nats?.stop();
  });

  it("writes the assignment while its watch's answer is held back, and the server stores the watch first", async () => {
    const watchlist = await watchlistOn(nc, 6);
    // The watch's answer reaches the creation only once the assignment is stored: a creation that
    // waited for it before writing the assignment would never finish.
    let releaseAnswer!: () => void;
    const answer = new Promise<void>((resolve) => (releaseAnswer = resolve));
    const watchUnlessWatched = watchlist.watchUnlessWatched.bind(watchlist);
    watchlist.watchUnlessWatched = async (id, dueAt) => {
      const revision = await watchUnlessWatched(id, dueAt);
      await answer;
      return revision;
    };
    const { service, watchOf } = await toolCallCreation(nc, oneReadTool("pipelined.read", "b-pipelined", "pipelined"), { watchlist });
    const assignments = await (await executionStores(nc))("assignments", AssignmentRecord);
    // Every write to the assignments bucket, in the order the server received them.
    const order: string[] = [];
    const spy = nc.subscribe("$KV.tg_assignments.>", { callback: (_err, m) => void order.push(m.subject.slice("$KV.tg_assignments.".length)) });
    await nc.flush();

    const creating = service.create("run-pipelined", { tool_name: "pipelined.read", arguments: {} });
    const stored = await until("the assignment stored, its watch unanswered", async () =>
      (await assignments.entries("*")).find((e) => e.value.run_id === "run-pipelined"),
    );
    releaseAnswer();
    const { assignment, created } = await creating;
    expect(created).toBe(true);
    expect(assignment.assignment_id).toBe(stored.key);

    const watch = await watchOf(assignment.assignment_id);
    expect(watch?.value).toEqual({ assignment_id: assignment.assignment_id, due_at: assignment.created_at + 10_000 });
    expect(watch!.revision).toBeLessThan(stored.revision);
    expect(order.slice(0, 2)).toEqual([`w.${assignment.assignment_id}`, assignment.assignment_id]);
    spy.unsubscribe();
  });
});
