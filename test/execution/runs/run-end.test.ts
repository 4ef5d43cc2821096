import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { CandidateQueue } from "../../../src/execution/dispatch/candidate-queue.js";
import { watchKey, watchlistOn, watchSubject } from "../../helpers/watches.js";
import { AssignmentRecord, RunRecord, WatchEntry } from "../../../src/execution/model/records.js";
import { RunService } from "../../../src/execution/runs/runs.js";
import { ControlChannel } from "../../../src/execution/transport/control-channel.js";
import { executionStores, openBucket } from "../../../src/kv/buckets.js";
import { EXECUTION_BUCKETS } from "../../../src/streams/names.js";
import { VersionedStore } from "../../../src/kv/versioned-store.js";
import { createLogger } from "../../../src/log/logger.js";
import type { Grant } from "../../../src/wire/messages.js";
import { startExecutionFixture, type ExecutionFixture } from "../../helpers/execution-gateway.js";
import { until } from "../../helpers/until.js";
import { DyingStore } from "../../helpers/dying-store.js";

const SCOPE = "run-end";

/**
 * A run's end is recorded on the run first (`ending`), then its assignments are settled, and only then
 * is it terminal: receipts never read the run. A gateway dying in between leaves a watch behind, by
 * which another gateway's sweeper finishes the end.
 */
describe("a run's end: recorded first, then its assignments, then the run", () => {
  let fx: ExecutionFixture;
  let dying: RunService;
  let watches: VersionedStore<WatchEntry>;

  beforeAll(async () => {
    fx = await startExecutionFixture({
      scope: SCOPE,
      agent: "run-end-bot",
      tools: [
        { name: "end.read", binding_id: "b-end-read" },
        { name: "end.write", binding_id: "b-end-write", tool_kind: "write" },
      ],
      executor: { id: "exec-end", start: "heartbeat" },
      // The sweeper takes over an end 1 s after it was asked for.
      execution: { sweepIntervalMs: 200, dispatchGraceMs: 1_000, reofferAfterMs: 60_000 },
    });
    const store = await executionStores(fx.nc);
    const js = jetstream(fx.nc);
    const jsm = await jetstreamManager(fx.nc);
    const bucket = EXECUTION_BUCKETS.assignments;
    // Its process dies at its first compare-and-set of an assignment: the end stops after recording itself.
    const assignments = new DyingStore(await openBucket(new Kvm(fx.nc), jsm, bucket), AssignmentRecord, { bucket, nc: fx.nc, js, jsm });
    watches = await store("assignments", WatchEntry);
    dying = new RunService(
      await store("runs", RunRecord),
      assignments,
      new CandidateQueue(fx.nc, jsm, { replicas: 1, ackWaitMs: 30_000 }),
      fx.gw.gateway.store,
      new ControlChannel(js, jsm),
      await watchlistOn(fx.nc),
      1_000,
      createLogger({ level: "silent" }),
    );
  });
  afterAll(async () => {
    await fx?.close();
  });

  const newRun = async (): Promise<string> => (await fx.gw.api("POST", `/v1/sessions/${fx.sessionId}/runs`)).run_id;
  const toolCall = async (runId: string, tool = "end.read"): Promise<string> =>
    (await fx.gw.api("POST", `/v1/runs/${runId}/tool-calls`, { tool_name: tool, arguments: {} })).assignment.assignment_id;
  const claimed = async (id: string): Promise<Grant> => {
    const reply = await fx.executor.claim(id, (await fx.executor.pullFor(id)).generation);
    if (reply.status !== "granted") throw new Error(`claim refused: ${reply.code}`);
    return reply.grant;
  };
  const running = async (id: string): Promise<Grant> => {
    const grant = await claimed(id);
    expect((await fx.executor.send(fx.executor.accepted(grant))).status).toBe("recorded");
    return grant;
  };
  const state = async (id: string): Promise<string> => (await fx.gw.api("GET", `/v1/assignments/${id}`)).state;
  const runEndWatches = async (): Promise<string[]> => (await watches.entries(watchKey("end.>"))).flatMap((e) => ("run_id" in e.value ? [e.value.run_id] : []));

  it("an end its process died in the middle of takes nothing more and is finished by another gateway's sweeper", async () => {
    const runId = await newRun();
    const pendingId = await toolCall(runId);
    const claimedGrant = await claimed(await toolCall(runId));
    const runningGrant = await running(await toolCall(runId));

    await expect(dying.end(runId, "cancel")).rejects.toThrow("the process died");
    const ending = await fx.gw.api("GET", `/v1/runs/${runId}`);
    expect(ending).toMatchObject({ state: "active", ending: { event: "cancel", at: expect.any(String) }, ended_at: null });
    expect(await runEndWatches()).toContain(runId);

    // No more tool calls, no more claims; the other end is refused, the first one recorded wins.
    const late = await fx.gw.http("POST", `/v1/runs/${runId}/tool-calls`, { tool_name: "end.read", arguments: {} });
    expect([late.status, late.body.error.code]).toEqual([409, "run_terminated"]);
    expect(await fx.executor.claim(pendingId, 0)).toMatchObject({ status: "refused", code: "run_terminated" });
    const other = await fx.gw.http("POST", `/v1/runs/${runId}:complete`);
    expect([other.status, other.body.error.code, other.body.error.message]).toEqual([
      409,
      "run_terminated",
      expect.stringContaining("being ended by 'cancel'"),
    ]);
    // Not settled yet, the claim may still be confirmed: the settling compare-and-set comes after, and orders the two.
    expect((await fx.executor.send(fx.executor.accepted(claimedGrant))).status).toBe("recorded");

    const ended = await until("the sweeper to finish the end", async () => {
      const run = await fx.gw.api<RunRecord>("GET", `/v1/runs/${runId}`);
      return run.state === "cancelled" ? run : undefined;
    });
    expect(ended).not.toHaveProperty("ending");
    expect(ended.ended_at).not.toBeNull();
    expect(await state(pendingId)).toBe("withdrawn");
    expect(await state(claimedGrant.assignment_id)).toBe("abandoned");
    expect(await state(runningGrant.assignment_id)).toBe("abandoned");
    expect(await runEndWatches()).not.toContain(runId);
    const told = await until("run_cancelled control", async () => fx.executor.controls.find((c) => c.type === "run_cancelled" && c.run_id === runId));
    expect(told).toMatchObject({ assignment_ids: expect.arrayContaining([claimedGrant.assignment_id, runningGrant.assignment_id]) });
    // Each assignment carries the end: a late receipt is answered by it, without the run.
    expect(await fx.executor.send(fx.executor.receipt(runningGrant, { kind: "completed", result: { late: true } }))).toMatchObject({
      status: "late_ignored",
      code: "run_terminated",
    });
  });

  it("ending it the same way again finishes an interrupted end at once, and leaves no watch", async () => {
    const runId = await newRun();
    const pendingId = await toolCall(runId);
    await expect(dying.end(runId, "complete")).rejects.toThrow("the process died");
    const res = await fx.gw.http("POST", `/v1/runs/${runId}:complete`);
    expect(res.status).toBe(200);
    expect(res.body.state).toBe("completed");
    expect(res.body).not.toHaveProperty("ending");
    expect(await state(pendingId)).toBe("withdrawn");
    expect(await runEndWatches()).not.toContain(runId);
    const again = await fx.gw.http("POST", `/v1/runs/${runId}:cancel`);
    expect([again.status, again.body.error.message]).toEqual([409, expect.stringContaining("already completed")]);
  });

  it("ending a run that does not exist, or ending a terminal run again, writes no watch", async () => {
    // Every write of the run's end watch (put or removal) is a publish on its key's subject: counted
    // as it happens, since a sweeper's purge of removal markers may erase the stored ones at any time.
    const writesOfEndWatch = async (runId: string, act: () => Promise<unknown>): Promise<number> => {
      let writes = 0;
      const sub = fx.nc.subscribe(watchSubject(`end.${runId}`), {
        callback: () => {
          writes++;
        },
      });
      await fx.nc.flush();
      try {
        await act();
        // The gateway answers after its writes were acknowledged; a round trip on this connection brings what the server sent before.
        await fx.nc.flush();
        return writes;
      } finally {
        sub.unsubscribe();
      }
    };
    expect(
      await writesOfEndWatch("run_missing", async () => {
        const missing = await fx.gw.http("POST", `/v1/runs/run_missing:cancel`);
        expect([missing.status, missing.body.error.code]).toEqual([404, "run_not_found"]);
      }),
    ).toBe(0);
    const runId = await newRun();
    // The first end writes its watch and removes it: what the count sees.
    expect(await writesOfEndWatch(runId, async () => expect((await fx.gw.http("POST", `/v1/runs/${runId}:complete`)).status).toBe(200))).toBe(2);
    expect(
      await writesOfEndWatch(runId, async () => {
        expect((await fx.gw.http("POST", `/v1/runs/${runId}:complete`)).body.state).toBe("completed");
        expect((await fx.gw.http("POST", `/v1/runs/${runId}:cancel`)).status).toBe(409);
      }),
    ).toBe(0);
  });

  it("a call waiting for reconciliation, which the end leaves as it is, takes no receipt once its run has ended", async () => {
    const runId = await newRun();
    const grant = await running(await toolCall(runId, "end.write"));
    const detached = await fx.gw.http("POST", `/v1/executors/${fx.executor.executorId}:detach`, { scope: SCOPE });
    expect(detached.status).toBe(200);
    expect(await state(grant.assignment_id)).toBe("reconciliation_required");
    await fx.executor.heartbeat();
    expect((await fx.gw.http("POST", `/v1/runs/${runId}:cancel`)).body.state).toBe("cancelled");
    expect(await state(grant.assignment_id)).toBe("reconciliation_required");
    expect(await fx.executor.send(fx.executor.receipt(grant, { kind: "completed", result: { reconciled: true } }))).toMatchObject({
      status: "late_ignored",
      code: "run_terminated",
    });
    expect(await state(grant.assignment_id)).toBe("reconciliation_required");
  });
});
