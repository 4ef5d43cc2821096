import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkHistory, readHistory } from "../../src/checker/index.js";
import { BusinessCancelled, BusinessFailure, CancelRequested, ToolRunner, type CompensationContext } from "../../src/runner/index.js";
import { FAST_RUNNER_TIMING } from "../runner/helpers/tasks-agent.js";
import { decode, encode } from "../../src/wire/codec.js";
import { ControlQueryReply, OperatorReceipt, type ControlRequest, type Grant, type Receipt } from "../../src/wire/messages.js";
import { subjects } from "../../src/wire/subjects.js";
import { definitionsWithPresenceTtl, seedSession, startExecutionGateway, type TestGateway } from "../helpers/execution-gateway.js";
import { startTestNats, type TestNats } from "../helpers/nats.js";
import { ProtocolExecutor } from "../helpers/protocol-executor.js";
import { until } from "../helpers/until.js";
import { registerExecutor } from "../helpers/registry.js";
import { STREAMS } from "../../src/streams/names.js";
import { onAbort } from "../helpers/abort.js";

/**
 * The five operations of docs/protocol.md section 4, one row of docs/operations-matrix.md per test,
 * including each arriving at the wrong moment: the real gateway, a real ToolRunner (SQLite in a temp
 * dir) for scope `ops`, protocol-level executors for scope `proto` (to hold a claim unconfirmed, or
 * to go silent), on a real nats-server with a 3 s presence TTL.
 */
const PRESENCE_TTL_MS = 3_000;

type Args = { key: string; mode?: "quick" | "wait" | "stubborn" | "fail" | "explode" };

describe("the five operations, side by side", () => {
  let nats: TestNats;
  let gw: TestGateway;
  let nc: NatsConnection;
  let runner: ToolRunner;
  let dir: string;
  let sessionId: string;
  const started = new Set<string>();
  const aborts = new Map<string, string>();
  const gates = new Map<string, () => void>();
  const compensations: Array<{ key: string; compensates: unknown; operationKey: string }> = [];
  const executors: ProtocolExecutor[] = [];

  beforeAll(async () => {
    nats = await startTestNats();
    gw = await startExecutionGateway(
      nats.url,
      { leaseMs: 3_000, sweepIntervalMs: 200, candidateAckWaitMs: 5_000 },
      {},
      definitionsWithPresenceTtl(PRESENCE_TTL_MS),
    );
    const store = gw.gateway.store;
    await store.putBinding({ binding_id: "proto-safe", executor_scope: "proto", tool_kind: "read", retry_reads_safe: true });
    // Tools of other scopes in the same toolset: a scope nobody serves, and one driven by protocol executors.
    for (const [binding, scope, kind] of [
      ["idle-read", "nobody", "read"],
      ["proto-write", "proto", "write"],
      ["proto-read", "proto", "read"],
    ] as const)
      await store.putBinding({ binding_id: binding, executor_scope: scope, tool_kind: kind });
    sessionId = await seedSession(store, {
      scope: "ops",
      agent: "ops-agent",
      tools: [
        { name: "task.write", binding_id: "ops-write", tool_kind: "write" },
        { name: "look.read", binding_id: "ops-read", tool_kind: "read" },
        { name: "idle.read", binding_id: "idle-read" },
        { name: "proto.write", binding_id: "proto-write", tool_kind: "write" },
        { name: "proto.read", binding_id: "proto-read" },
        { name: "proto.safe", binding_id: "proto-safe" },
      ],
    });
    nc = await connect({ servers: nats.url });
    await registerExecutor(nc, { executor_id: "exec-ops", scope: "ops", bindings: ["ops-write", "ops-read"] });
    dir = mkdtempSync(join(tmpdir(), "toolgate-ops-"));
    const work = async (ctx: { arguments: Args; signal: AbortSignal }) => {
      const { key, mode = "quick" } = ctx.arguments;
      started.add(key);
      onAbort(ctx.signal, () => aborts.set(key, (ctx.signal.reason as CancelRequested).kind));
      if (mode === "fail") throw new BusinessFailure("no_room", "the board is full");
      if (mode === "explode") throw new Error("connection lost after the write");
      if (mode === "wait" || mode === "stubborn") {
        await new Promise<void>((resolve, reject) => {
          gates.set(key, resolve);
          // `wait` stops and confirms when asked; `stubborn` finishes its work regardless.
          if (mode === "wait") onAbort(ctx.signal, () => reject(new BusinessCancelled(`stopped: ${(ctx.signal.reason as Error).message}`)));
        });
      }
      return { task_id: `task-${key}`, done: true };
    };
    runner = await ToolRunner.start({
      natsUrl: nats.url,
      executorId: "exec-ops",
      scope: "ops",
      store: join(dir, "runner.db"),
      logger: pino({ level: process.env.TEST_RUNNER_LOG ?? "silent" }),
      authorize: () => true,
      ...FAST_RUNNER_TIMING,
      tools: {
        "task.write": {
          kind: "write",
          bindingId: "ops-write",
          handler: work,
          compensate(ctx: CompensationContext<Args>) {
            compensations.push({ key: ctx.arguments.key, compensates: ctx.compensates, operationKey: ctx.grant.operation_key });
            return { undone: (ctx.compensates.result as { task_id: string }).task_id };
          },
        },
        "look.read": { kind: "read", bindingId: "ops-read", handler: work },
      },
    });
  });

  afterAll(async () => {
    for (const gate of gates.values()) gate();
    for (const e of executors) e.close();
    await runner?.close({ deadlineMs: 1_000 });
    await nc?.close();
    await gw?.close();
    await nats?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  // --- helpers --------------------------------------------------------------------------------

  const runs: string[] = [];
  const newRun = async (): Promise<string> => {
    const id: string = (await gw.http("POST", `/v1/sessions/${sessionId}/runs`)).body.run_id;
    runs.push(id);
    return id;
  };
  const call = async (runId: string, tool: string, args: unknown = {}): Promise<string> => {
    const res = await gw.http("POST", `/v1/runs/${runId}/tool-calls`, { tool_name: tool, arguments: args });
    if (res.status !== 201) throw new Error(JSON.stringify(res.body));
    return res.body.assignment.assignment_id;
  };
  const get = async (id: string) => (await gw.http("GET", `/v1/assignments/${id}`)).body;
  const untilState = (id: string, state: string) => until(`${id} to be ${state}`, async () => ((await get(id)).state === state ? get(id) : undefined));
  const protoExecutor = async (id: string): Promise<ProtocolExecutor> => {
    const e = new ProtocolExecutor(nc, "proto", id, ["proto-write", "proto-read", "proto-safe"]);
    executors.push(e);
    await e.heartbeat();
    return e;
  };
  /** Heartbeats on a timer (the protocol executor only beats when asked); returns the stop. */
  const keepAlive = (e: ProtocolExecutor): (() => void) => {
    const timer = setInterval(() => void e.heartbeat().catch(() => undefined), PRESENCE_TTL_MS / 6);
    return () => clearInterval(timer);
  };
  const claim = async (e: ProtocolExecutor, id: string, generation = 0): Promise<Grant> => {
    const candidate = await e.pullFor(id, generation);
    await e.heartbeat();
    const reply = await e.claim(id, candidate.generation);
    if (reply.status !== "granted") throw new Error(`claim of ${id} refused: ${reply.code}`);
    return reply.grant;
  };
  const accept = async (e: ProtocolExecutor, grant: Grant): Promise<Receipt> => {
    const accepted = e.accepted(grant);
    expect((await e.send(accepted)).status).toBe("recorded");
    return accepted;
  };
  const publishRequest = (request: ControlRequest) => jetstream(nc).publish(subjects.controlRequest(request.type), encode(request));

  // --- run cancel -----------------------------------------------------------------------------

  it("run cancel: terminal; pending withdrawn, unconfirmed claim revoked, running work told (ctx.signal), its later receipt late_ignored; idempotent", async () => {
    const runId = await newRun();
    const p = await protoExecutor("exec-rc");
    const pending = await call(runId, "idle.read");
    const claimedId = await call(runId, "proto.read");
    const grant = await claim(p, claimedId);
    const running = await call(runId, "task.write", { key: "rc", mode: "wait" });
    await untilState(running, "running");
    await until("the handler to start", () => (started.has("rc") ? true : undefined));

    const cancelled = await gw.http("POST", `/v1/runs/${runId}:cancel`);
    expect([cancelled.status, cancelled.body.state]).toEqual([200, "cancelled"]);
    expect([(await get(pending)).state, (await get(claimedId)).state, (await get(running)).state]).toEqual(["withdrawn", "revoked", "abandoned"]);
    expect(await p.send(p.accepted(grant))).toMatchObject({ status: "rejected", code: "run_terminated" });
    // Stored, not only sent: an executor that was away asks for what it missed.
    const missed = decode(
      ControlQueryReply,
      (await nc.request(subjects.controlQuery("proto", "exec-rc"), encode({ executor_id: "exec-rc", since: 0 }), { timeout: 5_000 })).data,
    );
    expect(missed.messages.map((m) => m.message)).toEqual([{ type: "run_cancelled", run_id: runId, assignment_ids: [claimedId] }]);
    expect(await until("ctx.signal", () => aborts.get("rc"))).toBe("run_cancelled");
    const local = await until("the handler's late receipt to be answered", async () => {
      const receipts = (await runner.assignment(running))?.receipts ?? [];
      return receipts.find((r) => r.kind === "cancelled" && r.answer) ?? undefined;
    });
    expect(local.answer).toMatchObject({ status: "late_ignored", code: "run_terminated" });
    expect((await get(running)).state).toBe("abandoned");

    const again = await gw.http("POST", `/v1/runs/${runId}:cancel`);
    expect([again.status, again.body.ended_at]).toEqual([200, cancelled.body.ended_at]);
    const otherEnd = await gw.http("POST", `/v1/runs/${runId}:complete`);
    expect([otherEnd.status, otherEnd.body.error.code]).toEqual([409, "run_terminated"]);
  });

  it("run cancel after complete: 409 run_terminated, the run and its tool calls unchanged", async () => {
    const runId = await newRun();
    const done = await call(runId, "task.write", { key: "rc-late" });
    await untilState(done, "completed");
    await gw.http("POST", `/v1/runs/${runId}:complete`);
    const before = [(await gw.http("GET", `/v1/runs/${runId}`)).body, await get(done)];
    const res = await gw.http("POST", `/v1/runs/${runId}:cancel`);
    expect([res.status, res.body.error.code]).toEqual([409, "run_terminated"]);
    expect([(await gw.http("GET", `/v1/runs/${runId}`)).body, await get(done)]).toEqual(before);
  });

  // --- executor detach ------------------------------------------------------------------------

  it("detaching heartbeat (runner.detach's announcement): the unconfirmed claim goes to another executor, generation + 1; the old accepted is refused", async () => {
    const runId = await newRun();
    const leaving = await protoExecutor("exec-leaving");
    const id = await call(runId, "proto.write");
    const old = await claim(leaving, id);
    expect((await leaving.heartbeat("detaching")).status).toBe("ok");
    const back = await untilState(id, "pending");
    expect([back.generation, back.executor_id]).toEqual([1, null]);
    const other = await protoExecutor("exec-other");
    const grant = await claim(other, id, 1);
    expect(grant.generation).toBe(1);
    expect(await leaving.send(leaving.accepted(old))).toMatchObject({ status: "rejected", code: "lease_expired" });
    await accept(other, grant);
    expect((await gw.http("GET", `/v1/runs/${runId}`)).body.state).toBe("active");
  });

  it("operator detach: claims back to the candidates, running write and unsafe read reconciliation_required, safe read offered again; run untouched; twice is idempotent", async () => {
    const runId = await newRun();
    const p = await protoExecutor("exec-detached");
    const stop = keepAlive(p);
    const claimedId = await call(runId, "proto.write");
    await claim(p, claimedId);
    const held: Record<string, Grant> = {};
    const accepted: Record<string, Receipt> = {};
    for (const tool of ["proto.write", "proto.read", "proto.safe"]) {
      const id = await call(runId, tool);
      held[tool] = await claim(p, id);
      accepted[tool] = await accept(p, held[tool]!);
    }
    const [write, read, safe] = ["proto.write", "proto.read", "proto.safe"].map((t) => held[t]!.assignment_id) as [string, string, string];
    stop();

    const res = await gw.http("POST", "/v1/executors/exec-detached:detach", { scope: "proto" });
    expect(res.status).toBe(200);
    expect({ ...res.body, reconciliation_required: [...res.body.reconciliation_required].sort() }).toEqual({
      executor_id: "exec-detached",
      scope: "proto",
      released: [claimedId],
      reconciliation_required: [write, read].sort(),
      retried: [safe],
    });
    expect((await get(write)).outcome.error.code).toBe("executor_detached");
    expect([(await get(claimedId)).generation, (await get(safe)).generation]).toEqual([1, 1]);
    expect((await gw.http("GET", `/v1/runs/${runId}`)).body.state).toBe("active");
    await until("the executor to be told", () => p.controls.find((c) => c.type === "detach_requested"));
    expect((await p.heartbeat()).status).toBe("refused");

    const snapshot = await Promise.all([claimedId, write, read, safe].map(get));
    const twice = await gw.http("POST", "/v1/executors/exec-detached:detach", { scope: "proto" });
    expect([twice.status, twice.body.released, twice.body.reconciliation_required, twice.body.retried]).toEqual([200, [], [], []]);
    expect(await Promise.all([claimedId, write, read, safe].map(get))).toEqual(snapshot);

    // Another executor takes what was released; the detached one's own final receipt still settles its write.
    const other = await protoExecutor("exec-successor");
    expect((await claim(other, claimedId, 1)).generation).toBe(1);
    expect((await claim(other, safe, 1)).generation).toBe(1);
    // The retried read's first accepted stays answerable from its assignment: asked for, or resent long after.
    const first = accepted["proto.safe"]!;
    expect(await p.query(first)).toMatchObject({ status: "recorded", kind: "accepted" });
    expect(await p.send({ ...first, replayed: true }, `${first.receipt_id}-later`)).toMatchObject({ status: "duplicate" });
    expect((await p.send(p.receipt(held["proto.write"]!, { kind: "completed", result: { ok: true } }))).status).toBe("recorded");
    expect((await get(write)).state).toBe("completed");
  });

  it("presence expiry with confirmed write work: reconciliation_required, never offered again; the run goes on", async () => {
    const runId = await newRun();
    const silent = await protoExecutor("exec-silent");
    const id = await call(runId, "proto.write");
    await accept(silent, await claim(silent, id));
    const settled = await untilState(id, "reconciliation_required"); // no more heartbeats: the presence lapses
    expect([settled.outcome.error.code, settled.generation, settled.executor_id]).toEqual(["executor_detached", 0, "exec-silent"]);
    expect((await gw.http("GET", `/v1/runs/${runId}`)).body.state).toBe("active");
  });

  it("held-claims report of a restarted executor: what it left out is detached (unconfirmed back, confirmed write reconciliation_required, safe read again); what it reports it keeps, generation included; twice detaches nothing", async () => {
    const runId = await newRun();
    const p = await protoExecutor("exec-restarted");
    const bystander = await protoExecutor("exec-bystander");
    const stop = [keepAlive(p), keepAlive(bystander)];
    const kept = await claim(p, await call(runId, "proto.write"));
    await accept(p, kept);
    const lostWrite = await claim(p, await call(runId, "proto.write"));
    await accept(p, lostWrite);
    const lostSafe = await claim(p, await call(runId, "proto.safe"));
    await accept(p, lostSafe);
    const others = await claim(bystander, await call(runId, "proto.write"));
    const lostUnconfirmed = await claim(p, await call(runId, "proto.write"));

    const reported = await p.reportHeld([{ assignment_id: kept.assignment_id, generation: kept.generation }]);
    expect(reported).toEqual({
      status: "ok",
      released: [lostUnconfirmed.assignment_id],
      reconciliation_required: [lostWrite.assignment_id],
      retried: [lostSafe.assignment_id],
    });
    const settled = await get(lostWrite.assignment_id);
    expect([settled.state, settled.outcome.error.code]).toEqual(["reconciliation_required", "executor_detached"]);
    expect(settled.outcome.error.message).toContain("without this claim in its store");
    expect([(await get(lostUnconfirmed.assignment_id)).generation, (await get(lostSafe.assignment_id)).generation]).toEqual([1, 1]);
    expect([(await get(kept.assignment_id)).state, (await get(others.assignment_id)).state]).toEqual(["running", "claimed"]);
    // What was released is refused to the executor that forgot it; another takes it.
    expect(await p.send(p.accepted(lostUnconfirmed))).toMatchObject({ status: "rejected", code: "lease_expired" });
    expect((await claim(bystander, lostUnconfirmed.assignment_id, 1)).generation).toBe(1);

    const twice = await p.reportHeld([{ assignment_id: kept.assignment_id, generation: kept.generation }]);
    expect(twice).toEqual({ status: "ok", released: [], reconciliation_required: [], retried: [] });
    // A claim of the same assignment at another generation is not the one held.
    const stale = await p.reportHeld([{ assignment_id: kept.assignment_id, generation: kept.generation + 1 }]);
    expect(stale).toEqual({ status: "ok", released: [], reconciliation_required: [kept.assignment_id], retried: [] });
    expect((await get(others.assignment_id)).state).toBe("claimed");
    stop.forEach((s) => s());
  });

  it("held-claims report refused: an executor the registry does not know, or a report for another scope; nothing detached", async () => {
    const runId = await newRun();
    const holder = await protoExecutor("exec-holder");
    const stop = keepAlive(holder);
    const grant = await claim(holder, await call(runId, "proto.write"));
    const stranger = new ProtocolExecutor(nc, "proto", "exec-holder-impostor", [], { register: false });
    executors.push(stranger);
    expect(await stranger.reportHeld([])).toMatchObject({ status: "refused", code: "executor_unknown" });
    expect(await holder.reportHeld([], "ops")).toMatchObject({ status: "refused", code: "malformed" });
    expect((await get(grant.assignment_id)).state).toBe("claimed");
    stop();
  });

  // --- business-task cancel -------------------------------------------------------------------

  it("task cancel: recorded once on the assignment, the handler's signal fires, it confirms: cancelled; the run goes on; asking again is idempotent", async () => {
    const runId = await newRun();
    const id = await call(runId, "task.write", { key: "tc", mode: "wait" });
    await untilState(id, "running");
    const res = await gw.http("POST", `/v1/assignments/${id}:cancel-task`, { reason: "the user changed their mind" });
    expect(res.status).toBe(200);
    expect(res.body.task_cancel).toMatchObject({ reason: "the user changed their mind" });
    const done = await untilState(id, "cancelled");
    expect(aborts.get("tc")).toBe("task_cancel_requested");
    expect(done.outcome).toEqual({ kind: "cancelled", reason: "stopped: the user changed their mind" });
    expect((await gw.http("GET", `/v1/runs/${runId}`)).body.state).toBe("active");
    const again = await gw.http("POST", `/v1/assignments/${id}:cancel-task`, { reason: "once more" });
    expect([again.status, again.body.task_cancel, again.body.state]).toEqual([200, res.body.task_cancel, "cancelled"]);
  });

  it("task cancel of a task that finishes first: completed", async () => {
    const runId = await newRun();
    const id = await call(runId, "task.write", { key: "tc-first", mode: "stubborn" });
    await untilState(id, "running");
    expect((await gw.http("POST", `/v1/assignments/${id}:cancel-task`)).status).toBe(200);
    await until("the signal", () => aborts.get("tc-first"));
    gates.get("tc-first")!();
    expect((await untilState(id, "completed")).task_cancel).not.toBeNull();
  });

  it("task cancel of a pending assignment: 409 task_not_running, nothing changes", async () => {
    const runId = await newRun();
    const id = await call(runId, "idle.read");
    const before = await get(id);
    const res = await gw.http("POST", `/v1/assignments/${id}:cancel-task`);
    expect([res.status, res.body.error.code]).toEqual([409, "task_not_running"]);
    expect(await get(id)).toEqual(before);
  });

  it("task cancel published by a product on tg.ctl.task_cancel", async () => {
    const runId = await newRun();
    const id = await call(runId, "task.write", { key: "tc-nats", mode: "wait" });
    await untilState(id, "running");
    await publishRequest({ type: "task_cancel", assignment_id: id, reason: "from the product" });
    expect((await untilState(id, "cancelled")).task_cancel.reason).toBe("from the product");
  });

  // --- compensation ---------------------------------------------------------------------------

  it("compensation: a new linked assignment with its own operation key and receipts, run by compensate; the original unchanged; twice returns the same; also after the run ended", async () => {
    const runId = await newRun();
    const id = await call(runId, "task.write", { key: "cmp" });
    const original = await untilState(id, "completed");
    const history = (await gw.http("GET", `/v1/runs/${runId}/history`)).body.tool_calls[0];
    await gw.http("POST", `/v1/runs/${runId}:complete`);

    const res = await gw.http("POST", `/v1/assignments/${id}:compensate`);
    expect([res.status, res.body.created]).toEqual([200, true]);
    const cid = res.body.compensation.assignment_id;
    expect(res.body.compensation).toMatchObject({ compensates: id, operation_key: `${original.operation_key}/compensate`, tool_name: "task.write" });
    const done = await untilState(cid, "completed");
    expect(done.final_receipt_id).toMatch(new RegExp(`^${cid}_g0_completed_`)); // its own receipts
    expect(compensations.find((c) => c.key === "cmp")).toEqual({
      key: "cmp",
      compensates: { assignment_id: id, operation_key: original.operation_key, result: { task_id: "task-cmp", done: true } },
      operationKey: `${original.operation_key}/compensate`,
    });
    const after = await get(id);
    expect(after).toEqual({ ...original, compensated_by: cid, updated_at: after.updated_at });
    const historyAfter = (await gw.http("GET", `/v1/runs/${runId}/history`)).body.tool_calls;
    expect(historyAfter).toEqual([{ ...history, compensated_by: cid }]); // the compensation is no tool call of the model

    const twice = await gw.http("POST", `/v1/assignments/${id}:compensate`);
    expect([twice.status, twice.body.created, twice.body.compensation.assignment_id]).toEqual([200, false, cid]);
    expect(compensations.filter((c) => c.key === "cmp")).toHaveLength(1);
  });

  it("compensate a read, a failed write or a compensation: 409 with a code, nothing changes", async () => {
    const runId = await newRun();
    const read = await call(runId, "look.read", { key: "cmp-read" });
    const failed = await call(runId, "task.write", { key: "cmp-failed", mode: "fail" });
    await untilState(read, "completed");
    await untilState(failed, "failed");
    for (const [id, code] of [
      [read, "read_not_compensable"],
      [failed, "not_completed"],
    ] as const) {
      const before = await get(id);
      const res = await gw.http("POST", `/v1/assignments/${id}:compensate`);
      expect([res.status, res.body.error.code]).toEqual([409, code]);
      expect(await get(id)).toEqual(before);
    }
    const done = await call(runId, "task.write", { key: "cmp-twice" });
    await untilState(done, "completed");
    const cid = (await gw.http("POST", `/v1/assignments/${done}:compensate`)).body.compensation.assignment_id;
    const res = await gw.http("POST", `/v1/assignments/${cid}:compensate`);
    expect([res.status, res.body.error.code]).toEqual([409, "compensation_not_compensable"]);
  });

  it("compensation published by a product on tg.ctl.compensate", async () => {
    const runId = await newRun();
    const id = await call(runId, "task.write", { key: "cmp-nats" });
    await untilState(id, "completed");
    await publishRequest({ type: "compensate", assignment_id: id });
    const cid = await until("the link", async () => (await get(id)).compensated_by ?? undefined);
    expect((await untilState(cid, "completed")).compensates).toBe(id);
  });

  // --- operator reconcile ---------------------------------------------------------------------

  it("operator reconcile: only reconciliation_required; an audited operator receipt; the same again is idempotent, another outcome a conflict", async () => {
    const runId = await newRun();
    const id = await call(runId, "task.write", { key: "rec", mode: "explode" });
    await untilState(id, "reconciliation_required");
    const completed = await call(runId, "task.write", { key: "rec-done" });
    const before = await untilState(completed, "completed");
    const wrong = await gw.http("POST", `/v1/assignments/${completed}:reconcile`, { outcome: "failed", error: { code: "x", message: "y" } });
    expect([wrong.status, wrong.body.error.code]).toEqual([409, "not_reconciliation_required"]);
    expect(await get(completed)).toEqual(before);

    const settle = { outcome: "completed", result: { task_id: "found-in-the-product-db" } };
    const res = await gw.http("POST", `/v1/assignments/${id}:reconcile`, settle);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ state: "completed", final_receipt_id: `${id}_operator`, settled_by: { operator: "admin" } });
    expect(res.body.context_preview.result).toEqual(settle.result);
    const stored = await (await jetstreamManager(nc)).streams.getMessage(STREAMS.receipts, { last_by_subj: subjects.operatorReceipt("ops", id) });
    expect(decode(OperatorReceipt, stored!.data)).toMatchObject({ receipt_id: `${id}_operator`, operator: "admin", kind: "completed", result: settle.result });

    const again = await gw.http("POST", `/v1/assignments/${id}:reconcile`, settle);
    expect([again.status, again.body.updated_at]).toEqual([200, res.body.updated_at]);
    const other = await gw.http("POST", `/v1/assignments/${id}:reconcile`, { outcome: "cancelled", reason: "changed my mind" });
    expect([other.status, other.body.error.code]).toEqual([409, "receipt_conflict"]);
    expect((await get(id)).final_receipt_id).toBe(`${id}_operator`);
  });

  it("a reconciliation_required the executor settles later stays answerable: duplicate, tg.rq recorded, another body a conflict", async () => {
    const runId = await newRun();
    const e = await protoExecutor("exec-reconciler");
    const stop = keepAlive(e); // its presence must not lapse: a detach would take the reconciliation_required edge first
    const id = await call(runId, "proto.write");
    const grant = await claim(e, id);
    await accept(e, grant);
    const unknown = e.receipt(grant, { kind: "reconciliation_required", error: { code: "crash", message: "outcome unknown" } });
    expect((await e.send(unknown)).status).toBe("recorded");
    expect((await e.send(e.receipt(grant, { kind: "completed", result: { found: true } }))).status).toBe("recorded");
    expect(await e.query(unknown)).toMatchObject({ status: "recorded", kind: "reconciliation_required" });
    expect(await e.send({ ...unknown, replayed: true }, `${unknown.receipt_id}-later`)).toMatchObject({ status: "duplicate" });
    expect(await e.send({ ...unknown, error: { code: "other", message: "?" } } as Receipt, `${unknown.receipt_id}-other`)).toMatchObject({
      status: "rejected",
      code: "receipt_conflict",
    });
    expect((await get(id)).state).toBe("completed");
    stop();
  });

  // --- all of it, checked ---------------------------------------------------------------------

  it("leaves a history the history checker finds consistent (once every run is ended)", async () => {
    for (const runId of runs) await gw.http("POST", `/v1/runs/${runId}:cancel`).then((r) => expect([200, 409]).toContain(r.status));
    const report = checkHistory(await readHistory(nc));
    expect(report.violations).toEqual([]);
  });
});
