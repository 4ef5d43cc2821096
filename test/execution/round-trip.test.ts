import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NatsConnection } from "@nats-io/transport-node";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { Packr } from "msgpackr";
import { JsonFloat, buildContextPreview, canonicalJson, parseExactJson } from "../../src/budget/index.js";
import { executionStores } from "../../src/kv/buckets.js";
import { AssignmentRecord } from "../../src/execution/model/records.js";
import { argumentDigest } from "../../src/wire/digest.js";
import { decode, encode } from "../../src/wire/codec.js";
import { Candidate, type Grant, type Receipt } from "../../src/wire/messages.js";
import { subjects } from "../../src/wire/subjects.js";
import { ADMIN_KEY, SCOPED_KEY, startExecutionFixture, type ExecutionFixture, type TestGateway } from "../helpers/execution-gateway.js";
import { registerExecutor } from "../helpers/registry.js";
import { ProtocolExecutor } from "../helpers/protocol-executor.js";
import { until } from "../helpers/until.js";
import { processorOnSameBuckets } from "../helpers/receipt-processor.js";
import { watchlistOn, watchReader, watchSubject } from "../helpers/watches.js";
import { receiptIndexed, storedAssignment as storedRecord } from "../helpers/stored-records.js";
import { candidateConsumer, STREAMS } from "../../src/streams/names.js";

const SCOPE = "prod";

describe("execution path: round trip over JetStream and HTTP", () => {
  let fx: ExecutionFixture, gw: TestGateway, nc: NatsConnection, exec: ProtocolExecutor, sessionId: string;
  beforeAll(async () => {
    fx = await startExecutionFixture({
      scope: SCOPE,
      agent: "support-bot",
      tools: [
        {
          name: "tasks.read",
          binding_id: "b-read",
          input_schema: {
            type: "object",
            properties: { cursor: { type: "string" }, n: { type: "number" }, after: { type: "integer", minimum: 0 } },
            additionalProperties: false,
          },
        },
      ],
      executor: { id: "exec-1", start: "heartbeat" },
    });
    ({ gw, nc, executor: exec, sessionId } = fx);
    await gw.gateway.store.putBinding({ binding_id: "b-other", executor_scope: "other", tool_kind: "read" });
  });
  afterAll(() => fx?.close());

  const newRun = async (): Promise<string> => {
    const res = await gw.http("POST", `/v1/sessions/${sessionId}/runs`);
    expect(res.status).toBe(201);
    return res.body.run_id;
  };
  const newToolCall = async (runId: string, args: unknown = { cursor: "a" }, extra: Record<string, unknown> = {}): Promise<string> => {
    const res = await gw.http("POST", `/v1/runs/${runId}/tool-calls`, { tool_name: "tasks.read", arguments: args, ...extra });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    return res.body.assignment.assignment_id;
  };
  /** Tool call -> candidate -> claim -> accepted; returns the grant of running work. */
  const runningCall = async (runId: string): Promise<Grant> => {
    const id = await newToolCall(runId);
    const candidate = await exec.pullFor(id);
    const reply = await exec.claim(id, candidate.generation);
    if (reply.status !== "granted") throw new Error(`claim refused: ${reply.code}`);
    expect((await exec.send(exec.accepted(reply.grant))).status).toBe("recorded");
    return reply.grant;
  };
  const assignment = async (id: string) => (await gw.http("GET", `/v1/assignments/${id}`)).body;

  it("runs a tool call end to end: claim, grant, accepted, progress, completed, projection in history", async () => {
    const runId = await newRun();
    const args = { cursor: "page-1" };
    const id = await newToolCall(runId, args, { tool_call_id: "call_1" });
    expect((await assignment(id)).state).toBe("pending");

    const candidate = await exec.pullFor(id);
    expect(candidate).toMatchObject({ assignment_id: id, run_id: runId, tool_name: "tasks.read", binding_id: "b-read", generation: 0 });
    const reply = await exec.claim(id, 0);
    expect(reply.status).toBe("granted");
    if (reply.status !== "granted") return;
    const grant = reply.grant;
    expect(grant).toMatchObject({
      assignment_id: id,
      run_id: runId,
      session_id: sessionId,
      executor_id: "exec-1",
      arguments: args,
      subject: "user-1",
      agent: "support-bot",
      tool_kind: "read",
    });
    expect(grant.argument_digest).toBe(argumentDigest(args));
    expect(grant.claim_token.length).toBeGreaterThanOrEqual(43);
    expect((await assignment(id)).state).toBe("claimed");

    expect(await exec.send(exec.accepted(grant))).toMatchObject({ status: "recorded", kind: "accepted" });
    expect((await assignment(id)).state).toBe("running");
    for (const seq of [2, 1]) expect((await exec.send(exec.receipt(grant, { kind: "progress", seq, progress: { done: seq } }))).status).toBe("recorded");
    const result = { next_cursor: "page-2", tasks: [{ id: "t1", title: "任务 ✅" }] };
    expect((await exec.send(exec.receipt(grant, { kind: "completed", result }))).status).toBe("recorded");

    const view = await assignment(id);
    expect(view).toMatchObject({ state: "completed", executor_id: "exec-1", tool_call_id: "call_1" });
    expect(view.progress.map((p: { seq: number }) => p.seq)).toEqual([1, 2]);
    const history = await gw.http("GET", `/v1/runs/${runId}/history`);
    expect(history.status).toBe(200);
    expect(history.body.tool_calls).toHaveLength(1);
    expect(history.body.tool_calls[0]).toMatchObject({ assignment_id: id, state: "completed", arguments: args });
    expect(history.body.tool_calls[0].context_preview).toMatchObject({ truncated: false, result, max_result_context_bytes: 16_384 });
  });

  it("projects a 200 KiB result once with the tool's budget, and serves the stored projection", async () => {
    const runId = await newRun();
    const grant = await runningCall(runId);
    const result = { status: "ok", items: Array.from({ length: 2_000 }, (_, i) => ({ i, text: "x".repeat(90) })) };
    expect(JSON.stringify(result).length).toBeGreaterThan(200 * 1024);
    expect((await exec.send(exec.receipt(grant, { kind: "completed", result }))).status).toBe("recorded");
    const first = (await gw.http("GET", `/v1/runs/${runId}/history`)).body.tool_calls[0].context_preview;
    expect(first.truncated).toBe(true);
    expect(first.original_bytes).toBeGreaterThan(200 * 1024);
    expect(first.retained_bytes).toBeLessThanOrEqual(16_384);
    const again = (await gw.http("GET", `/v1/runs/${runId}/history`)).body.tool_calls[0].context_preview;
    expect(again).toEqual(first);
  });

  it("keeps numbers exact from the arguments to history, and serves the stored projection in the bytes it was measured in", async () => {
    const runId = await newRun();
    // Arguments as JSON text: a float JS would write as an integer and an id beyond 2**53.
    const created = await fetch(`${gw.baseUrl}/v1/runs/${runId}/tool-calls`, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN_KEY}`, "content-type": "application/json" },
      body: '{"tool_name":"tasks.read","arguments":{"cursor":"c","n":1.0,"after":9007199254740993}}',
    });
    expect(created.status).toBe(201);
    const createdText = await created.text();
    expect(createdText).toContain('"arguments":{"after":9007199254740993,"cursor":"c","n":1.0}');
    const id = (parseExactJson(createdText) as { assignment: { assignment_id: string } }).assignment.assignment_id;
    await exec.pullFor(id);
    const reply = await exec.claim(id, 0);
    if (reply.status !== "granted") throw new Error(`claim refused: ${reply.code}`);
    expect(reply.grant.arguments).toEqual({ cursor: "c", n: new JsonFloat(1), after: 9007199254740993n });
    expect(reply.grant.argument_digest).toBe(argumentDigest({ cursor: "c", n: new JsonFloat(1), after: 9007199254740993n }));
    expect((await exec.send(exec.accepted(reply.grant))).status).toBe("recorded");
    const tasks = Array.from({ length: 400 }, (_, i) => ({ id: 18446744073709551615n - BigInt(i), ratio: new JsonFloat(i), title: "t".repeat(40) }));
    const result = { status: "ok", huge: 10n ** 30n, tasks };
    expect((await exec.send(exec.receipt(reply.grant, { kind: "completed", result }))).status).toBe("recorded");
    const served = await (await fetch(`${gw.baseUrl}/v1/runs/${runId}/history`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } })).text();
    const measured = canonicalJson(buildContextPreview(result, { maxResultContextBytes: 16_384 }));
    expect(measured).toContain('"tasks.9.id":18446744073709551606');
    expect(served).toContain(`"context_preview":${measured}`);
    // Stored in the record that completed the call (store layout 2), in the bytes it was measured in.
    const entry = await (await new Kvm(nc).open("tg_assignments")).get(id);
    expect(canonicalJson(decode(AssignmentRecord, entry!.value).projection!.context_preview)).toBe(measured);
  });

  it("refuses arguments too large to store the tool call in one NATS message: 400 on `arguments`, nothing created", async () => {
    const runId = await newRun();
    const before = (await gw.http("GET", `/v1/runs/${runId}/history`)).body.tool_calls.length;
    const res = await gw.http("POST", `/v1/runs/${runId}/tool-calls`, { tool_name: "tasks.read", arguments: { cursor: "x".repeat(nc.info!.max_payload) } });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: "validation_failed", details: [{ path: "arguments", code: "too_big" }] });
    expect(res.body.error.details[0].allowed).toContain(`max_payload (${nc.info!.max_payload})`);
    expect((await gw.http("GET", `/v1/runs/${runId}/history`)).body.tool_calls).toHaveLength(before);
  });

  it("validates arguments against input_schema with paths, and makes tool_call_id idempotent", async () => {
    const runId = await newRun();
    const bad = await gw.http("POST", `/v1/runs/${runId}/tool-calls`, { tool_name: "tasks.read", arguments: { cursor: 7, extra: true } });
    expect(bad.status).toBe(400);
    expect(bad.body.error.details.map((d: { path: string }) => d.path).sort()).toEqual(["arguments.cursor", "arguments.extra"]);
    const unknown = await gw.http("POST", `/v1/runs/${runId}/tool-calls`, { tool_name: "nope.read", arguments: {} });
    expect(unknown.status).toBe(404);

    const body = { tool_name: "tasks.read", arguments: { cursor: "z" }, tool_call_id: "call_same" };
    const a = await gw.http("POST", `/v1/runs/${runId}/tool-calls`, body);
    const b = await gw.http("POST", `/v1/runs/${runId}/tool-calls`, body);
    expect(a.body.created).toBe(true);
    expect(b.body.created).toBe(false);
    expect(b.body.assignment.assignment_id).toBe(a.body.assignment.assignment_id);
    const other = await gw.http("POST", `/v1/runs/${runId}/tool-calls`, { ...body, arguments: { cursor: "y" } });
    expect(other.status).toBe(409);
    expect(other.body.error.code).toBe("idempotency_conflict");
    expect((await gw.http("GET", `/v1/runs/${runId}`)).body.assignment_ids).toEqual([a.body.assignment.assignment_id]);
  });

  it("checks the agent scope on every route", async () => {
    const runId = await newRun();
    const id = await newToolCall(runId);
    for (const [method, path] of [
      ["POST", `/v1/sessions/${sessionId}/runs`],
      ["GET", `/v1/runs/${runId}`],
      ["GET", `/v1/runs/${runId}/history`],
      ["GET", `/v1/assignments/${id}`],
      ["POST", `/v1/runs/${runId}:cancel`],
      ["POST", `/v1/runs/${runId}:complete`],
    ] as const) {
      const res = await gw.http(method, path, undefined, SCOPED_KEY);
      expect(res.status, `${method} ${path}`).toBe(403);
      expect(res.body.error.code).toBe("agent_out_of_scope");
    }
    const create = await gw.http("POST", `/v1/runs/${runId}/tool-calls`, { tool_name: "tasks.read", arguments: {} }, SCOPED_KEY);
    expect(create.status).toBe(403);
  });

  it("never puts arguments or a grant into a candidate message", async () => {
    const runId = await newRun();
    const secret = "arg-secret-4711";
    const id = await newToolCall(runId, { cursor: secret });
    const consumer = await jetstream(nc).consumers.get(STREAMS.candidates, candidateConsumer(SCOPE));
    const raw = new Packr({ useRecords: false, mapsAsObjects: true });
    for (let i = 0; i < 20; i++) {
      const batch = await consumer.fetch({ max_messages: 16, expires: 1_000 });
      for await (const m of batch) {
        m.ack();
        expect(Buffer.from(m.data).includes(secret)).toBe(false);
        const map = raw.unpack(m.data) as Record<string, unknown>;
        expect(Object.keys(map).sort()).toEqual(Object.keys(Candidate.shape).sort());
        if (map.assignment_id === id) return;
      }
    }
    throw new Error("candidate not seen");
  });

  it("refuses claims from offline and out-of-scope executors", async () => {
    const runId = await newRun();
    const id = await newToolCall(runId);
    const offline = new ProtocolExecutor(nc, SCOPE, "exec-offline", ["b-read"]);
    expect(await offline.claim(id, 0)).toMatchObject({ status: "refused", code: "executor_offline" });
    const detaching = new ProtocolExecutor(nc, SCOPE, "exec-detaching", ["b-read"]);
    await detaching.heartbeat("detaching");
    expect(await detaching.claim(id, 0)).toMatchObject({ status: "refused", code: "executor_offline" });

    const foreign = new ProtocolExecutor(nc, "other", "exec-foreign", ["b-other"]);
    expect((await foreign.heartbeat()).status).toBe("ok");
    expect(await foreign.claim(id, 0)).toMatchObject({ status: "refused", code: "out_of_scope" });
    // Registered in scope `other` for b-other only, it declares b-read (of another scope) in its heartbeat.
    await registerExecutor(nc, { executor_id: "exec-sneaky", scope: "other", bindings: ["b-other"] });
    const sneaky = new ProtocolExecutor(nc, "other", "exec-sneaky", ["b-read"], { register: false });
    expect(await sneaky.heartbeat()).toMatchObject({ status: "refused", code: "binding_not_granted" });
    const unbound = new ProtocolExecutor(nc, SCOPE, "exec-unbound", []);
    expect((await unbound.heartbeat()).status).toBe("ok");
    expect(await unbound.claim(id, 0)).toMatchObject({ status: "refused", code: "binding_not_granted" });
    expect((await assignment(id)).state).toBe("pending");
    for (const e of [offline, detaching, foreign, sneaky, unbound]) e.close();
  });

  it("treats a resend as a duplicate, refuses a conflicting body and a missing or wrong token", async () => {
    const runId = await newRun();
    const grant = await runningCall(runId);
    const done = exec.receipt(grant, { kind: "completed", result: { v: 1 } });
    expect((await exec.send(done)).status).toBe("recorded");
    const before = await gw.http("GET", `/v1/runs/${runId}/history`);

    // Inside the stream's dedup window: the stream drops the resend and the stored answer is asked for.
    expect((await exec.send(done)).status).toBe("recorded");
    // After the window (simulated by another Nats-Msg-Id): the assignment that applied it decides.
    expect(await publishAndAwait(nc, { ...done, replayed: true }, "later-1")).toMatchObject({ status: "duplicate" });
    expect(await publishAndAwait(nc, { ...done, result: { v: 2 } }, "later-2")).toMatchObject({ status: "rejected", code: "receipt_conflict" });
    expect(await exec.query(done)).toMatchObject({ status: "recorded" });
    expect((await gw.http("GET", `/v1/runs/${runId}/history`)).body).toEqual(before.body);

    const grant2 = await runningCall(runId);
    for (const token of ["", "x".repeat(43)]) {
      const forged = exec.receipt(grant2, { kind: "completed", result: { forged: true } }, undefined, token);
      expect(await exec.send(forged)).toMatchObject({ status: "rejected", code: "invalid_token" });
    }
    const impostor = new ProtocolExecutor(nc, SCOPE, "exec-2", ["b-read"]);
    const stolen = { ...exec.receipt(grant2, { kind: "completed", result: {} }), executor_id: "exec-2" };
    expect(await impostor.send(stolen)).toMatchObject({ status: "rejected", code: "invalid_token" });
    impostor.close();
    expect((await assignment(grant2.assignment_id)).state).toBe("running");
  });

  it("indexes no receipt the assignment applied: it answers resends, conflicts and tg.rq for accepted, progress and completed itself", async () => {
    const runId = await newRun();
    const id = await newToolCall(runId);
    const reply = await exec.claim(id, (await exec.pullFor(id)).generation);
    if (reply.status !== "granted") throw new Error(reply.reason);
    const grant = reply.grant;
    const accepted = exec.accepted(grant);
    const progress = exec.receipt(grant, { kind: "progress", seq: 1, progress: { half: true } });
    const done = exec.receipt(grant, { kind: "completed", result: { v: 1 } });
    const writesBefore = await indexWrites();
    for (const r of [accepted, progress, done]) expect((await exec.send(r)).status).toBe("recorded");
    // No index entry: the record carries the progress too (store layout 4), whatever its receipt's id.
    expect(await indexWrites()).toBe(writesBefore);
    expect([await indexed(accepted.receipt_id), await indexed(progress.receipt_id), await indexed(done.receipt_id)]).toEqual([false, false, false]);
    expect((await storedAssignment(id)).progress_log).toMatchObject([{ seq: 1, receipt_id: progress.receipt_id, progress: { half: true } }]);
    const before = await gw.http("GET", `/v1/runs/${runId}/history`);

    for (const r of [accepted, progress, done]) {
      expect(await exec.query(r)).toEqual({ receipt_id: r.receipt_id, assignment_id: id, kind: r.kind, status: "recorded" });
      // Long after the stream's dedup window (another Nats-Msg-Id): the same body is a duplicate.
      expect(await exec.send({ ...r, replayed: true }, `${r.receipt_id}-later`)).toMatchObject({ status: "duplicate", kind: r.kind });
    }
    // Another executor asking about them learns nothing but that they are not its own.
    const nosy = new ProtocolExecutor(nc, SCOPE, "exec-nosy", ["b-read"]);
    for (const r of [accepted, progress, done]) expect(await nosy.query(r)).toEqual({ status: "refused", code: "not_yours", reason: expect.any(String) });
    expect(await nosy.query({ ...done, receipt_id: "never-sent" })).toMatchObject({ status: "pending" });
    nosy.close();
    expect(await exec.send({ ...accepted, argument_digest: argumentDigest({ cursor: "other" }) } as Receipt, `${accepted.receipt_id}-other`)).toMatchObject({
      status: "rejected",
      code: "receipt_conflict",
    });
    expect(await exec.send({ ...progress, progress: { half: false } } as Receipt, `${progress.receipt_id}-other`)).toMatchObject({
      status: "rejected",
      code: "receipt_conflict",
    });
    expect(await exec.send({ ...done, result: { v: 2 } } as Receipt, `${done.receipt_id}-other`)).toMatchObject({
      status: "rejected",
      code: "receipt_conflict",
    });
    // Neither the duplicates nor the conflicts wrote an entry; nothing changed.
    expect(await indexWrites()).toBe(writesBefore);
    expect((await gw.http("GET", `/v1/runs/${runId}/history`)).body).toEqual(before.body);
  });

  it("answers a redelivered message as the first time: recorded, not duplicate", async () => {
    const runId = await newRun();
    const id = await newToolCall(runId);
    const reply = await exec.claim(id, (await exec.pullFor(id)).generation);
    if (reply.status !== "granted") throw new Error(reply.reason);
    const accepted = exec.accepted(reply.grant);
    const done = exec.receipt(reply.grant, { kind: "completed", result: { once: true } });
    for (const r of [accepted, done]) expect((await exec.send(r)).status).toBe("recorded");
    const stored = await storedAssignment(id);
    // Another gateway's processor on the same buckets, handed the very messages again (a redelivery after a crash before the ack).
    const processor = await processorOnSameBuckets(nc);
    const input = { scope: SCOPE, subjectExecutorId: exec.executorId, subjectAssignmentId: id, msgId: undefined, redelivered: true };
    expect(await processor.process({ ...input, receipt: accepted, streamSeq: stored.accepted!.stream_seq })).toMatchObject({
      status: "recorded",
      kind: "accepted",
    });
    expect(await processor.process({ ...input, receipt: done, streamSeq: stored.final!.stream_seq })).toMatchObject({ status: "recorded", kind: "completed" });
    expect(await storedAssignment(id)).toEqual(stored);
  });

  it("erases a settled call's watch with a purge that asks for no answer, which a stop flushes to the server", async () => {
    const runId = await newRun();
    const id = await newToolCall(runId);
    const reply = await exec.claim(id, (await exec.pullFor(id)).generation);
    if (reply.status !== "granted") throw new Error(reply.reason);
    // Every purge of the assignments bucket (where the watches are), as the server receives it.
    const purges: Array<{ filter: string; reply: string }> = [];
    const spy = nc.subscribe("$JS.API.STREAM.PURGE.KV_tg_assignments", {
      callback: (_err, m) => {
        purges.push({ filter: (JSON.parse(m.string()) as { filter: string }).filter, reply: m.reply ?? "" });
      },
    });
    await nc.flush();
    const watchlist = await watchlistOn(nc);
    const processor = await processorOnSameBuckets(nc, { watchlist });
    const input = { scope: SCOPE, subjectExecutorId: exec.executorId, subjectAssignmentId: id, msgId: undefined, redelivered: false };
    expect(await processor.process({ ...input, receipt: exec.accepted(reply.grant), streamSeq: 1_000_001 })).toMatchObject({ status: "recorded" });
    const watchOf = await watchReader(nc);
    expect(await watchOf(id)).not.toBeNull();
    const done = exec.receipt(reply.grant, { kind: "completed", result: { fast: true } });
    expect(await processor.process({ ...input, receipt: done, streamSeq: 1_000_002 })).toMatchObject({ status: "recorded", kind: "completed" });
    await watchlist.settled();
    // The server received it (a stop waits for that), and carries it out with nobody to answer.
    await until("the purge to reach the server", () => (purges.length > 0 ? true : undefined));
    expect(purges).toEqual([{ filter: watchSubject(id), reply: "" }]);
    await until("the watch to be erased", async () => ((await watchOf(id)) === null ? true : undefined));
    spy.unsubscribe();
  });

  it("answers a redelivered final receipt as it was applied, even where a gateway remembers the assignment before it and the run ended since", async () => {
    const runId = await newRun();
    const grant = await runningCall(runId);
    const store = await executionStores(nc);
    // This processor's memory holds the assignment `running`: it read it before another gateway applied `completed`.
    const remembering = (await store("assignments", AssignmentRecord)).withRevisionCache(16);
    expect((await remembering.get(grant.assignment_id))?.value.state).toBe("running");
    const processor = await processorOnSameBuckets(nc, { assignments: remembering });
    const done = exec.receipt(grant, { kind: "completed", result: { late: false } });
    expect((await exec.send(done)).status).toBe("recorded");
    expect((await gw.http("POST", `/v1/runs/${runId}:cancel`)).status).toBe(200);
    const stored = await storedAssignment(grant.assignment_id);
    const input = { scope: SCOPE, subjectExecutorId: exec.executorId, subjectAssignmentId: grant.assignment_id, msgId: done.receipt_id, redelivered: true };
    // The remembered `running` and the ended run would make it `late_ignored`: the verdict rests on a fresh read.
    expect(await processor.process({ ...input, receipt: done, streamSeq: stored.final!.stream_seq })).toMatchObject({ status: "recorded", kind: "completed" });
    expect(await indexed(done.receipt_id)).toBe(false);
    expect(await storedAssignment(grant.assignment_id)).toEqual(stored);
  });

  it("refuses a receipt id used by progress and then by a final receipt, or the other way, as a conflict", async () => {
    const runId = await newRun();
    const grant = await runningCall(runId);
    const acceptedId: string = (await assignment(grant.assignment_id)).accepted_receipt_id;
    const progress = exec.receipt(grant, { kind: "progress", seq: 1, progress: {} });
    expect((await exec.send(progress)).status).toBe("recorded");
    // Each reuse is published with another Nats-Msg-Id, as after the stream's dedup window.
    const reuse = (r: Receipt) => exec.send(r, `${r.receipt_id}-as-${r.kind}`);
    expect(await reuse(exec.receipt(grant, { kind: "completed", result: {} }, progress.receipt_id))).toMatchObject({
      status: "rejected",
      code: "receipt_conflict",
    });
    expect(await reuse(exec.receipt(grant, { kind: "progress", seq: 2, progress: {} }, acceptedId))).toMatchObject({
      status: "rejected",
      code: "receipt_conflict",
    });
    expect(await assignment(grant.assignment_id)).toMatchObject({ state: "running", final_receipt_id: null, progress: [{ seq: 1 }] });
    const done = exec.receipt(grant, { kind: "completed", result: { ok: true } });
    expect((await exec.send(done)).status).toBe("recorded");
    expect(await reuse(exec.receipt(grant, { kind: "progress", seq: 3, progress: {} }, done.receipt_id))).toMatchObject({
      status: "rejected",
      code: "receipt_conflict",
    });
    expect(await exec.query(done)).toMatchObject({ status: "recorded", kind: "completed" });
  });

  it("refuses an accepted receipt whose argument digest is not the assignment's, and changes nothing", async () => {
    const runId = await newRun();
    const id = await newToolCall(runId, { cursor: "real" });
    const reply = await exec.claim(id, (await exec.pullFor(id)).generation);
    if (reply.status !== "granted") throw new Error(reply.reason);
    // What an executor would send had the grant's arguments and digest both been altered on the way.
    const tampered = exec.receipt(reply.grant, {
      kind: "accepted",
      operation_key: reply.grant.operation_key,
      argument_digest: argumentDigest({ cursor: "evil" }),
    });
    expect(await exec.send(tampered)).toMatchObject({ status: "rejected", code: "argument_digest_mismatch" });
    expect(await assignment(id)).toMatchObject({ state: "claimed", accepted_receipt_id: null });
    // The refusal is audited: kept in the receipts stream and in the receipt index.
    expect(await exec.query(tampered)).toMatchObject({ status: "rejected", code: "argument_digest_mismatch" });
    expect((await exec.send(exec.accepted(reply.grant))).status).toBe("recorded");
    expect((await assignment(id)).state).toBe("running");
  });

  it("keeps a cancelled run terminated: withdraws, revokes, abandons, and late receipts change nothing", async () => {
    const runId = await newRun();
    const running = await runningCall(runId);
    const claimedId = await newToolCall(runId);
    const claimed = await exec.claim(claimedId, (await exec.pullFor(claimedId)).generation);
    if (claimed.status !== "granted") throw new Error("claim refused");
    const pendingId = await newToolCall(runId);
    const pendingCandidate = await candidateOf(pendingId);
    expect(pendingCandidate).not.toBeNull();

    const cancel = await gw.http("POST", `/v1/runs/${runId}:cancel`);
    expect(cancel.status).toBe(200);
    expect(cancel.body.state).toBe("cancelled");
    expect((await assignment(running.assignment_id)).state).toBe("abandoned");
    expect((await assignment(claimedId)).state).toBe("revoked");
    expect((await assignment(pendingId)).state).toBe("withdrawn");
    const jsm = await jetstreamManager(nc);
    expect(await jsm.streams.getMessage(STREAMS.candidates, { seq: pendingCandidate!.seq })).toBeNull();
    expect(await candidateOf(pendingId)).toBeNull();
    const told = await until("run_cancelled control", async () => exec.controls.find((c) => c.type === "run_cancelled" && c.run_id === runId), 5_000);
    expect(told).toMatchObject({ assignment_ids: expect.arrayContaining([running.assignment_id, claimedId]) });

    expect(await exec.send(exec.accepted(claimed.grant))).toMatchObject({ status: "rejected", code: "run_terminated" });
    expect(await exec.send(exec.receipt(running, { kind: "progress", seq: 1, progress: {} }))).toMatchObject({ status: "late_ignored" });
    expect(await exec.send(exec.receipt(running, { kind: "completed", result: { late: true } }))).toMatchObject({
      status: "late_ignored",
      code: "run_terminated",
    });
    expect((await assignment(running.assignment_id)).state).toBe("abandoned");
    const history = (await gw.http("GET", `/v1/runs/${runId}/history`)).body;
    expect(history.state).toBe("cancelled");
    expect(history.tool_calls.every((c: { context_preview: unknown }) => c.context_preview === null)).toBe(true);

    expect((await gw.http("POST", `/v1/runs/${runId}:cancel`)).status).toBe(200);
    expect((await gw.http("POST", `/v1/runs/${runId}:complete`)).body.error.code).toBe("run_terminated");
    expect((await gw.http("POST", `/v1/runs/${runId}/tool-calls`, { tool_name: "tasks.read", arguments: {} })).status).toBe(409);
    // A withdrawn assignment answers for its own state, as docs/protocol.md says.
    expect(await exec.claim(pendingId, 0)).toMatchObject({ status: "refused", code: "withdrawn" });
  });

  it("keeps a completed run terminated: a call that settled itself answers later receipts by its own state", async () => {
    const runId = await newRun();
    const grant = await runningCall(runId);
    expect((await exec.send(exec.receipt(grant, { kind: "completed", result: { ok: 1 } }))).status).toBe("recorded");
    expect((await gw.http("POST", `/v1/runs/${runId}:complete`)).body.state).toBe("completed");
    expect((await gw.http("POST", `/v1/runs/${runId}:complete`)).status).toBe(200);
    // No run is read for a receipt: the completed call refuses another final receipt, as it would in an active run.
    const refused = { status: "rejected", code: "illegal_transition" };
    expect(await exec.send(exec.receipt(grant, { kind: "failed", error: { code: "late", message: "too late" } }))).toMatchObject(refused);
    expect(await exec.send(exec.receipt(grant, { kind: "completed", result: { ok: 2 } }))).toMatchObject(refused);
    const history = (await gw.http("GET", `/v1/runs/${runId}/history`)).body;
    expect(history.state).toBe("completed");
    expect(history.tool_calls[0]).toMatchObject({ state: "completed", context_preview: { result: { ok: 1 } } });
  });

  it("terminates malformed receipt messages without blocking the ones after them", async () => {
    const runId = await newRun();
    const grant = await runningCall(runId);
    const js = jetstream(nc);
    await js.publish(subjects.receipt(SCOPE, exec.executorId, grant.assignment_id), new Uint8Array([0xc1, 0xff, 0x00]), { msgID: "garbage-1" });
    await js.publish(subjects.receipt(SCOPE, exec.executorId, grant.assignment_id), encode({ receipt_id: "x", kind: "completed" }), { msgID: "garbage-2" });
    await js.publish(
      subjects.receipt(SCOPE, exec.executorId, grant.assignment_id),
      encode({ ...exec.receipt(grant, { kind: "completed", result: { n: Number.NaN } }) }),
      { msgID: "nan-1" },
    );
    expect(await exec.query(exec.receipt(grant, { kind: "completed", result: null }, "nan-1"))).toMatchObject({ status: "pending" });
    expect((await exec.send(exec.receipt(grant, { kind: "completed", result: { fine: true } }))).status).toBe("recorded");
    expect((await assignment(grant.assignment_id)).state).toBe("completed");
  });

  /** The assignment's candidate still in the stream, found by its own subject (nothing of it is in the record). */
  async function candidateOf(assignmentId: string): Promise<{ seq: number } | null> {
    const a = await storedAssignment(assignmentId);
    expect(a.candidate_seq).toBeNull();
    return (await jetstreamManager(nc)).streams.getMessage(STREAMS.candidates, { last_by_subj: subjects.candidate(SCOPE, a.binding_id, assignmentId) });
  }

  const storedAssignment = (assignmentId: string) => storedRecord(nc, assignmentId);
  const indexed = (receiptId: string) => receiptIndexed(nc, receiptId);

  /** Messages ever written to the receipt index bucket (it is create-only: one per entry). */
  async function indexWrites(): Promise<number> {
    return (await (await jetstreamManager(nc)).streams.info("KV_tg_receipt_index")).state.last_seq;
  }
});

/** Publishes past the stream's de-duplication (another Nats-Msg-Id) and returns the answer for this receipt id. */
async function publishAndAwait(
  nc: NatsConnection,
  receipt: Record<string, unknown> & { receipt_id: string; assignment_id: string; executor_id: string },
  msgID: string,
): Promise<unknown> {
  const { decode } = await import("../../src/wire/codec.js");
  const { ReceiptAnswer } = await import("../../src/wire/messages.js");
  const answered = new Promise((resolve) => {
    const sub = nc.subscribe(subjects.answers(SCOPE, receipt.executor_id), {
      callback: (_e, m) => {
        const a = decode(ReceiptAnswer, m.data);
        if (a.receipt_id === receipt.receipt_id) {
          sub.unsubscribe();
          resolve(a);
        }
      },
    });
  });
  await jetstream(nc).publish(subjects.receipt(SCOPE, receipt.executor_id, receipt.assignment_id), encode(receipt), { msgID });
  return answered;
}
