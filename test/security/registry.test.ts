import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstream } from "@nats-io/jetstream";
import { receiptBodyDigest } from "../../src/wire/digest.js";
import { decode, encode } from "../../src/wire/codec.js";
import { ClaimReply, ControlQueryResult, PresenceReply, ReceiptQueryReply, type Grant, type Receipt } from "../../src/wire/messages.js";
import { EXECUTOR_JS_API_PREFIX, subjects } from "../../src/wire/subjects.js";
import { ADMIN_KEY, seedSession } from "../helpers/execution-gateway.js";
import { startTestNats, type TestNats } from "../helpers/nats.js";
import { ProtocolExecutor } from "../helpers/protocol-executor.js";
import { until } from "../helpers/until.js";
import { registerExecutor } from "../helpers/registry.js";
import { startCapturedGateway, type CapturedGateway } from "./helpers.js";

const SCOPE = "sec";
const OTHER = "sec-other";

/**
 * The executor registry is the authority over claims, checked by two gateway replicas on a server
 * without the generated NATS authorization (the layout with it: nats-auth.test.ts). Every refusal
 * has its code in the answer, a log line and a metric.
 */
describe("the executor registry decides who may claim what", () => {
  let nats: TestNats;
  let gateways: CapturedGateway[];
  let nc: NatsConnection;
  let sessionId: string;
  const executors: ProtocolExecutor[] = [];

  beforeAll(async () => {
    nats = await startTestNats();
    gateways = [await startCapturedGateway(nats.url, {}, "debug"), await startCapturedGateway(nats.url, {}, "debug")];
    sessionId = await seedSession(gateways[0]!.gateway.store, {
      scope: SCOPE,
      agent: "sec-bot",
      tools: [
        { name: "sec.read", binding_id: "sec-r" },
        { name: "sec.write", binding_id: "sec-w", tool_kind: "write" },
      ],
    });
    await gateways[0]!.gateway.store.putBinding({ binding_id: "other-r", executor_scope: OTHER, tool_kind: "read" });
    nc = await connect({ servers: nats.url });
  });
  afterAll(async () => {
    for (const e of executors) e.close();
    await nc?.close();
    for (const g of gateways ?? []) await g.close();
    await nats?.stop();
  });

  /** JSON over HTTP to one replica (the first unless told). */
  const http = async (method: "GET" | "POST" | "PUT" | "DELETE", url: string, payload?: object, replica = 0) => {
    const res = await gateways[replica]!.gateway.app.inject({
      method,
      url,
      headers: { authorization: `Bearer ${ADMIN_KEY}` },
      ...(payload ? { payload } : {}),
    });
    return { status: res.statusCode, body: res.json() };
  };
  const toolCall = async (tool: "sec.read" | "sec.write") => {
    const run = (await http("POST", `/v1/sessions/${sessionId}/runs`)).body.run_id;
    return (await http("POST", `/v1/runs/${run}/tool-calls`, { tool_name: tool, arguments: {} })).body.assignment.assignment_id as string;
  };
  const assignment = async (id: string) => (await http("GET", `/v1/assignments/${id}`)).body;
  /** A new read tool call claimed by `e` and confirmed (`accepted` recorded); its grant. */
  const runningRead = async (e: ProtocolExecutor): Promise<Grant> => {
    const id = await toolCall("sec.read");
    const reply = await e.claim(id, (await e.pullFor(id)).generation);
    if (reply.status !== "granted") throw new Error(reply.reason);
    expect((await e.send(e.accepted(reply.grant))).status).toBe("recorded");
    return reply.grant;
  };
  const executor = (id: string, bindings: string[], scope = SCOPE) => {
    const e = new ProtocolExecutor(nc, scope, id, bindings, { register: false });
    executors.push(e);
    return e;
  };
  /** Refusals counted by both replicas for one request subject and code. */
  const refusals = async (request: string, code: string) => {
    let total = 0;
    for (const g of gateways) {
      const values = (await g.gateway.metrics.registry.getSingleMetric("toolgate_request_refusals_total")!.get()).values;
      total += values.filter((v) => v.labels.request === request && v.labels.code === code).reduce((n, v) => n + v.value, 0);
    }
    return total;
  };
  /** Waits until every replica's view of the registry has `executorId` with `bindings` (null: not registered). */
  const everyView = (executorId: string, bindings: string[] | null) =>
    until(
      `every replica's view to have ${executorId} at ${JSON.stringify(bindings)}`,
      async () => {
        const viewed = await Promise.all(gateways.map((g) => g.gateway.executors.get(executorId)));
        return viewed.every((e) => JSON.stringify(e ? e.bindings : null) === JSON.stringify(bindings)) ? true : undefined;
      },
      5_000,
    );
  /** The replicas' log lines of refusals with `code` for `executorId`. */
  const refusalLines = (code: string, executorId: string) =>
    gateways
      .flatMap((g) => g.lines)
      .filter((l) => l.includes('"request refused"') && l.includes(`"code":"${code}"`) && l.includes(`"executor_id":"${executorId}"`));

  it("refuses a never registered executor: heartbeat and claim are executor_unknown, no grant", async () => {
    const id = await toolCall("sec.read");
    const stranger = executor("stranger", ["sec-r"]);
    const before = { presence: await refusals("presence", "executor_unknown"), claim: await refusals("claim", "executor_unknown") };
    expect(await stranger.heartbeat()).toMatchObject({ status: "refused", code: "executor_unknown" });
    expect(await stranger.claim(id, 0)).toMatchObject({ status: "refused", code: "executor_unknown" });
    expect((await assignment(id)).state).toBe("pending");
    expect(await refusals("presence", "executor_unknown")).toBe(before.presence + 1);
    expect(await refusals("claim", "executor_unknown")).toBe(before.claim + 1);
    expect(refusalLines("executor_unknown", "stranger")).toHaveLength(2);
  });

  it("refuses bindings a heartbeat declares beyond its registration: binding_not_granted", async () => {
    await registerExecutor(nc, { executor_id: "reader", scope: SCOPE, bindings: ["sec-r"] });
    const greedy = executor("reader", ["sec-w", "sec-r"]);
    expect(await greedy.heartbeat()).toMatchObject({ status: "refused", code: "binding_not_granted" });
    const honest = executor("reader", ["sec-r"]);
    expect((await honest.heartbeat()).status).toBe("ok");
    // Online now, it still may not claim what the registry does not grant it.
    const write = await toolCall("sec.write");
    expect(await honest.claim(write, 0)).toMatchObject({ status: "refused", code: "binding_not_granted" });
    expect((await assignment(write)).state).toBe("pending");
    const read = await toolCall("sec.read");
    expect((await honest.claim(read, (await honest.pullFor(read)).generation)).status).toBe("granted");
    expect(refusalLines("binding_not_granted", "reader").length).toBeGreaterThanOrEqual(2);
    expect(await refusals("claim", "binding_not_granted")).toBeGreaterThanOrEqual(1);
  });

  it("refuses an executor registered in one scope on the subjects of another: out_of_scope", async () => {
    await registerExecutor(nc, { executor_id: "wanderer", scope: OTHER, bindings: ["other-r"] });
    const abroad = executor("wanderer", [], SCOPE);
    expect(await abroad.heartbeat()).toMatchObject({ status: "refused", code: "out_of_scope" });
    const id = await toolCall("sec.read");
    expect(await abroad.claim(id, 0)).toMatchObject({ status: "refused", code: "out_of_scope" });
    expect((await assignment(id)).state).toBe("pending");
  });

  it("applies a registry change to the next claim on every replica once its view has it, and removing an executor detaches its work", async () => {
    await registerExecutor(nc, { executor_id: "worker", scope: SCOPE, bindings: ["sec-r", "sec-w"] });
    const worker = executor("worker", ["sec-r", "sec-w"]);
    expect((await worker.heartbeat()).status).toBe("ok");

    // The write binding taken away on replica 1: claims on it are refused, whichever replica answers, once its view has the change.
    expect((await http("PUT", "/v1/executors/worker/bindings", { bindings: ["sec-r"] }, 1)).status).toBe(200);
    await everyView("worker", ["sec-r"]);
    const writes = await Promise.all([0, 1, 2, 3, 4, 5].map(() => toolCall("sec.write")));
    for (const id of writes) expect(await worker.claim(id, 0)).toMatchObject({ status: "refused", code: "binding_not_granted" });
    // Its heartbeat still declaring the write binding is refused too; declaring what it is granted is fine.
    expect(await worker.heartbeat()).toMatchObject({ status: "refused", code: "binding_not_granted" });
    const granted = executor("worker", ["sec-r"]);
    expect((await granted.heartbeat()).status).toBe("ok");

    // Work in flight: one read running (accepted), one claimed but unconfirmed.
    const running = (await runningRead(granted)).assignment_id;
    const claimed = await toolCall("sec.read");
    expect((await granted.claim(claimed, (await granted.pullFor(claimed)).generation)).status).toBe("granted");

    // Removed on replica 1: a detach of its work in flight, and from now on it is unknown everywhere (once every view has the removal).
    const removed = await http("DELETE", "/v1/executors/worker", undefined, 1);
    expect(removed).toMatchObject({ status: 200, body: { removed: true, released: [claimed], reconciliation_required: [running] } });
    await everyView("worker", null);
    expect(await assignment(claimed)).toMatchObject({ state: "pending", generation: 1 });
    expect(await assignment(running)).toMatchObject({ state: "reconciliation_required", outcome: { error: { code: "executor_detached" } } });
    expect(await granted.heartbeat()).toMatchObject({ status: "refused", code: "executor_unknown" });
    for (const _ of [0, 1, 2, 3]) expect(await granted.claim(claimed, 1)).toMatchObject({ status: "refused", code: "executor_unknown" });
    expect(granted.controls).toContainEqual({ type: "detach_requested", executor_id: "worker" });
  });

  it("answers receipt_conflict for another body under a recorded receipt id inside the dedup window", async () => {
    await registerExecutor(nc, { executor_id: "reporter", scope: SCOPE, bindings: ["sec-r"] });
    const reporter = executor("reporter", ["sec-r"]);
    expect((await reporter.heartbeat()).status).toBe("ok");
    const grant = await runningRead(reporter);
    const id = grant.assignment_id;
    const progress = reporter.receipt(grant, { kind: "progress", seq: 1, progress: { step: "one" } });
    expect((await reporter.send(progress)).status).toBe("recorded");

    // The same receipt id and Nats-Msg-Id, another body: the stream drops it, so the sender asks tg.rq.
    const other: Receipt = { ...progress, progress: { step: "forged" } } as Receipt;
    const before = await refusals("rq", "receipt_conflict");
    const ack = await jetstream(nc, { apiPrefix: EXECUTOR_JS_API_PREFIX }).publish(subjects.receipt(SCOPE, "reporter", id), encode(other), {
      msgID: progress.receipt_id,
    });
    expect(ack.duplicate).toBe(true);
    expect(await reporter.query(other)).toMatchObject({ status: "rejected", code: "receipt_conflict" });
    expect(await refusals("rq", "receipt_conflict")).toBe(before + 1);
    expect(refusalLines("receipt_conflict", "reporter")).toHaveLength(1);
    // The same body stays an idempotent duplicate; what is stored is the first body.
    expect(await reporter.send(progress)).toMatchObject({ status: "recorded" });
    expect((await assignment(id)).progress).toEqual([expect.objectContaining({ seq: 1, progress: { step: "one" } })]);
    expect(receiptBodyDigest(other)).not.toBe(receiptBodyDigest(progress));
  });

  it("answers malformed on every request subject, a body naming another executor included", async () => {
    await registerExecutor(nc, { executor_id: "clumsy", scope: SCOPE, bindings: [] });
    const ask = async (subject: string, body: Uint8Array) => (await nc.request(subject, body, { timeout: 5_000 })).data;
    const garbage = new Uint8Array([0xc1, 0xff]);
    const otherExecutor = { executor_id: "someone-else" };
    for (const body of [garbage, encode({ receipt_id: "r", assignment_id: "a", kind: "accepted", body_digest: "0".repeat(64), ...otherExecutor })])
      expect(decode(ReceiptQueryReply, await ask(subjects.receiptQuery(SCOPE, "clumsy"), body))).toMatchObject({ status: "refused", code: "malformed" });
    for (const body of [garbage, encode({ since: 0, ...otherExecutor })])
      expect(decode(ControlQueryResult, await ask(subjects.controlQuery(SCOPE, "clumsy"), body))).toMatchObject({ status: "refused", code: "malformed" });
    expect(decode(ClaimReply, await ask(subjects.claim(SCOPE, "clumsy"), garbage))).toMatchObject({ status: "refused", code: "malformed" });
    expect(decode(PresenceReply, await ask(subjects.presence(SCOPE, "clumsy"), garbage))).toMatchObject({ status: "refused", code: "malformed" });
    await until("six malformed log lines", async () => (refusalLines("malformed", "clumsy").length === 6 ? true : undefined), 5_000);
  });
});
