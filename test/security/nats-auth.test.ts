import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, nkeyAuthenticator, nkeys, type NatsConnection } from "@nats-io/transport-node";

type KeyPair = ReturnType<typeof nkeys.createUser>;
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { natsConfigCommand } from "../../src/cli/commands/nats-config.js";
import { decode, encode } from "../../src/wire/codec.js";
import { ClaimReply, ControlQueryResult, HeldClaimsReply, PresenceReply, ReceiptQueryReply } from "../../src/wire/messages.js";
import { EXECUTOR_JS_API_PREFIX, executorInboxPrefix, subjects } from "../../src/wire/subjects.js";
import { natsServerBinary, startNatsServer, type NatsServerProcess } from "../../src/nats/nats-server-process.js";
import { compareVersions } from "../../src/nats/server-version.js";
import { until } from "../helpers/until.js";
import { seedSession, startExecutionGateway, type TestGateway } from "../helpers/execution-gateway.js";
import { ProtocolExecutor } from "../helpers/protocol-executor.js";
import { registerExecutor } from "../helpers/registry.js";
import { candidateConsumer, STREAMS } from "../../src/streams/names.js";

/**
 * nats-server runs with the config `toolgate nats-config` generates; every refusal below comes
 * from the server itself (a permission violation or an account boundary), not from the gateway.
 * A server that has the new ack subject format (2.14+, feature flag `js_ack_fc_v2`) runs with it on.
 */
const ACK_V2 = compareVersions(/v(\d+\.\d+\.\d+)/.exec(execFileSync(natsServerBinary(), ["--version"], { encoding: "utf8" }))![1]!, "2.14.0") >= 0;
const seedOf = (k: KeyPair) => new TextDecoder().decode(k.getSeed());

describe("NATS authorization generated from the executor registry", () => {
  const dir = mkdtempSync(join(tmpdir(), "toolgate-auth-"));
  const gatewayKey = nkeys.createUser();
  const keys = { e1: nkeys.createUser(), e2: nkeys.createUser(), e3: nkeys.createUser(), ghost: nkeys.createUser(), stranger: nkeys.createUser() };
  let server: NatsServerProcess;
  let gw: TestGateway;
  let e1: NatsConnection;
  let e2: NatsConnection;
  let e3: NatsConnection;
  let admin: NatsConnection;
  const errors: string[] = [];
  let sessionId: string;

  const executorConnection = (scope: string, id: string, key: KeyPair) =>
    connect({ servers: server.url, authenticator: nkeyAuthenticator(key.getSeed()), inboxPrefix: executorInboxPrefix(scope, id) });

  beforeAll(async () => {
    const registry = [
      { executor_id: "e1", scope: "s1", nkeys: [keys.e1.getPublicKey()], bindings: ["b1"] },
      { executor_id: "e2", scope: "s2", nkeys: [keys.e2.getPublicKey()], bindings: ["b2"] },
      // Same scope and binding as e1: the two must still not be able to speak for each other.
      { executor_id: "e3", scope: "s1", nkeys: [keys.e3.getPublicKey()], bindings: ["b1"] },
      // Admitted by the server config but not (any more) in the gateway's registry.
      { executor_id: "ghost", scope: "s1", nkeys: [keys.ghost.getPublicKey()], bindings: ["b1"] },
    ];
    writeFileSync(join(dir, "executors.json"), JSON.stringify(registry));
    expect(
      await natsConfigCommand.run(["--gateway-nkey", gatewayKey.getPublicKey(), "--executors", join(dir, "executors.json"), "--out", join(dir, "auth.conf")]),
    ).toBe(0);
    writeFileSync(join(dir, "server.conf"), `include "auth.conf"\n${ACK_V2 ? "feature_flags { js_ack_fc_v2: true }\n" : ""}`);
    server = await startNatsServer({ args: ["-c", join(dir, "server.conf")] });
    gw = await startExecutionGateway(server.url, {}, { NATS_NKEY_SEED: seedOf(gatewayKey) });
    sessionId = await seedSession(gw.gateway.store, {
      scope: "s1",
      agent: "bot",
      tools: [
        { name: "tasks.read", binding_id: "b1" },
        { name: "tasks.create", binding_id: "b1w", tool_kind: "write" },
      ],
    });
    await gw.gateway.store.putBinding({ binding_id: "b2", executor_scope: "s2", tool_kind: "read" });
    admin = gw.gateway.nc;
    // The same registry the server config was generated from, now in the gateway's registry: the authority over claims.
    for (const executor of registry.filter((e) => e.executor_id !== "ghost")) await registerExecutor(admin, executor);
    e1 = await executorConnection("s1", "e1", keys.e1);
    e2 = await executorConnection("s2", "e2", keys.e2);
    e3 = await executorConnection("s1", "e3", keys.e3);
    void (async () => {
      for await (const s of e1.status()) if (s.type === "error") errors.push(String((s as { error?: Error }).error?.message));
    })();
  });
  afterAll(async () => {
    await e1?.close();
    await e2?.close();
    await e3?.close();
    await gw?.close();
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Waits for the server's permission violation naming `subject`. */
  const violation = async (kind: "Publish" | "Subscription", subject: string) => {
    const text = `Permissions Violation for ${kind} to "${subject}"`;
    await until(`the server's ${text}`, () => (errors.some((e) => e.includes(text)) ? true : undefined), 5_000, 20);
  };

  it("generates only public keys, one account per side", () => {
    const text = readFileSync(join(dir, "auth.conf"), "utf8");
    expect(text).toContain(keys.e1.getPublicKey());
    for (const k of [gatewayKey, keys.e1, keys.e2]) expect(text).not.toContain(seedOf(k));
    expect(text).toMatch(/TOOLGATE \{\s+jetstream: enabled/);
  });

  it("lets the permitted flow through: heartbeat, pull, claim, accepted, completed", async () => {
    const exec = new ProtocolExecutor(e1, "s1", "e1", ["b1"], { register: false });
    expect((await exec.heartbeat()).status).toBe("ok");
    const run = (await gw.http("POST", `/v1/sessions/${sessionId}/runs`)).body.run_id;
    const call = await gw.http("POST", `/v1/runs/${run}/tool-calls`, { tool_name: "tasks.read", arguments: {} });
    const id = call.body.assignment.assignment_id;
    const candidate = await exec.pullFor(id);
    const reply = await exec.claim(id, candidate.generation);
    if (reply.status !== "granted") throw new Error(reply.reason);
    expect((await exec.send(exec.accepted(reply.grant))).status).toBe("recorded");
    expect((await exec.send(exec.receipt(reply.grant, { kind: "completed", result: { ok: true } }))).status).toBe("recorded");
    expect((await gw.http("GET", `/v1/assignments/${id}`)).body.state).toBe("completed");
    exec.close();
  });

  it(`lets an executor acknowledge a pulled candidate on the ack subject the server hands out${ACK_V2 ? " (the new format: $JS.ACK.<domain>.<account hash>.…)" : ""}`, async () => {
    const exec = new ProtocolExecutor(e1, "s1", "e1", ["b1"]);
    const run = (await gw.http("POST", `/v1/sessions/${sessionId}/runs`)).body.run_id;
    const id = (await gw.http("POST", `/v1/runs/${run}/tool-calls`, { tool_name: "tasks.read", arguments: {} })).body.assignment.assignment_id;
    await exec.pullFor(id);
    const jsm = await jetstreamManager(admin);
    await until(
      "the candidate acknowledged",
      async () => ((await jsm.consumers.info(STREAMS.candidates, candidateConsumer("s1"))).num_ack_pending === 0 ? true : undefined),
      10_000,
    );
    expect(errors.filter((e) => e.includes("$JS.ACK"))).toEqual([]);
    exec.close();
  });

  it("refuses connections without a registered key", async () => {
    await expect(connect({ servers: server.url, reconnect: false })).rejects.toThrow(/Authorization/i);
    await expect(connect({ servers: server.url, reconnect: false, authenticator: nkeyAuthenticator(keys.stranger.getSeed()) })).rejects.toThrow(
      /Authorization/i,
    );
  });

  it("refuses subscriptions to other executors' answers, control, inboxes and to raw candidates", async () => {
    for (const subject of [
      subjects.answers("s1", "e2"),
      subjects.answers("s2", "e2"),
      subjects.executorControl("s2", "e2"),
      "_INBOX.>",
      `${executorInboxPrefix("s2", "e2")}.>`,
      "tg.cand.>",
      "tg.>",
      ">",
    ]) {
      e1.subscribe(subject);
      await violation("Subscription", subject);
    }
  });

  it("refuses publishing into another scope, control subjects, events and the JetStream/KV API", async () => {
    for (const subject of [
      subjects.claim("s2", "e2"),
      subjects.presence("s2", "e2"),
      subjects.heldClaims("s2", "e2"),
      subjects.receipt("s2", "e2", "a1"),
      subjects.receiptQuery("s2", "e2"),
      subjects.executorControl("s1", "e1"),
      subjects.answers("s1", "e1"),
      subjects.runEvents("r1"),
      subjects.candidate("s1", "b1", "a1"),
      "$KV.tg_assignments.a1",
      "$JS.API.STREAM.INFO.KV_tg_assignments",
      "$JS.API.CONSUMER.MSG.NEXT.TG_CANDIDATES.cand-s1",
      `${EXECUTOR_JS_API_PREFIX}.CONSUMER.MSG.NEXT.${STREAMS.candidates}.cand-s2`,
      `$JS.ACK.${STREAMS.candidates}.cand-s2.1.1.1.1.1`,
    ]) {
      e1.publish(subject, encode({}));
      await violation("Publish", subject);
    }
  });

  it("refuses claiming, heartbeating, querying and publishing receipts as another executor of the same scope", async () => {
    for (const subject of [
      subjects.claim("s1", "e3"),
      subjects.presence("s1", "e3"),
      subjects.heldClaims("s1", "e3"),
      subjects.receiptQuery("s1", "e3"),
      subjects.receipt("s1", "e3", "a1"),
    ]) {
      e1.publish(subject, encode({}));
      await violation("Publish", subject);
    }
    // Request/reply too: the server drops the request, so no gateway ever answers it.
    await expect(e1.request(subjects.claim("s1", "e3"), encode({ assignment_id: "x", executor_id: "e3", generation: 0 }), { timeout: 500 })).rejects.toThrow();
  });

  it("refuses, at the gateway, a message on an executor's own subject that names another executor", async () => {
    const own = new ProtocolExecutor(e1, "s1", "e1", ["b1"], { register: false });
    try {
      // e1 writes e3's id into the body of requests on its own subjects.
      const claim = decode(
        ClaimReply,
        (await e1.request(subjects.claim("s1", "e1"), encode({ assignment_id: "x", executor_id: "e3", generation: 0 }), { timeout: 5_000 })).data,
      );
      expect(claim).toMatchObject({ status: "refused", code: "malformed" });
      const beat = { executor_id: "e3", scope: "s1", bindings: ["b1"], status: "online", in_flight: 0 };
      expect(decode(PresenceReply, (await e1.request(subjects.presence("s1", "e1"), encode(beat), { timeout: 5_000 })).data)).toMatchObject({
        status: "refused",
      });
      const query = { receipt_id: "r1", assignment_id: "a1", executor_id: "e3", kind: "accepted", body_digest: "0".repeat(64) };
      expect(decode(ReceiptQueryReply, (await e1.request(subjects.receiptQuery("s1", "e1"), encode(query), { timeout: 5_000 })).data)).toMatchObject({
        status: "refused",
        code: "malformed",
      });
      const control = decode(
        ControlQueryResult,
        (await e1.request(subjects.controlQuery("s1", "e1"), encode({ executor_id: "e3", since: 0 }), { timeout: 5_000 })).data,
      );
      expect(control).toMatchObject({ status: "refused", code: "malformed" });
      const held = decode(
        HeldClaimsReply,
        (await e1.request(subjects.heldClaims("s1", "e1"), encode({ executor_id: "e3", scope: "s1", held: [] }), { timeout: 5_000 })).data,
      );
      expect(held).toMatchObject({ status: "refused", code: "malformed" });

      // A receipt naming e3 published on e1's own receipt subject is rejected, answered to e1 (the publisher), and changes nothing.
      expect((await own.heartbeat()).status).toBe("ok");
      // Its own report crosses the account boundary and is admitted by its nkey.
      expect(await own.reportHeld([])).toEqual({ status: "ok", released: [], reconciliation_required: [], retried: [] });
      const run = (await gw.http("POST", `/v1/sessions/${sessionId}/runs`)).body.run_id;
      const id = (await gw.http("POST", `/v1/runs/${run}/tool-calls`, { tool_name: "tasks.read", arguments: {} })).body.assignment.assignment_id;
      const reply = await own.claim(id, (await own.pullFor(id)).generation);
      if (reply.status !== "granted") throw new Error(reply.reason);
      const forged = { ...own.accepted(reply.grant), executor_id: "e3" };
      const answered = own.answerFor(forged.receipt_id);
      await jetstream(e1, { apiPrefix: EXECUTOR_JS_API_PREFIX }).publish(subjects.receipt("s1", "e1", id), encode(forged), { msgID: forged.receipt_id });
      expect(await answered).toMatchObject({ status: "rejected", code: "malformed" });
      expect((await gw.http("GET", `/v1/assignments/${id}`)).body.state).toBe("claimed");
    } finally {
      own.close();
    }
  });

  it("refuses pulling another scope's candidates and reading the KV buckets", async () => {
    const js = jetstream(e1, { apiPrefix: EXECUTOR_JS_API_PREFIX, timeout: 1_000 });
    await expect(js.consumers.get(STREAMS.candidates, "cand-s2")).rejects.toThrow();
    await violation("Publish", `${EXECUTOR_JS_API_PREFIX}.CONSUMER.INFO.${STREAMS.candidates}.cand-s2`);
    const kv = await new Kvm(jetstream(e1, { timeout: 1_000 })).open("tg_assignments", { bindOnly: true });
    await expect(kv.get("any")).rejects.toThrow();
    await expect(jetstreamManager(e1, { timeout: 1_000 })).rejects.toThrow();
  });

  it("cannot make the server or the gateway write a KV entry by choosing a reply subject", async () => {
    const kv = await new Kvm(admin).open("tg_config");
    const revision = await kv.put("probe", "original");
    // A JetStream API answer or a gateway reply sent to `$KV.…` would overwrite the entry in a single account.
    e1.publish(`${EXECUTOR_JS_API_PREFIX}.CONSUMER.INFO.${STREAMS.candidates}.cand-s1`, new Uint8Array(), { reply: "$KV.tg_config.probe" });
    e1.publish(subjects.claim("s1", "e1"), encode({ assignment_id: "x", executor_id: "e1", generation: 0 }), { reply: "$KV.tg_config.probe" });
    e1.publish(subjects.presence("s1", "e1"), encode({}), { reply: "$KV.tg_config.probe" });
    // Barriers: the same three requests with an ordinary reply, answered after the probes on the same
    // paths; then a write to the bucket, stored after anything those answers could have written.
    await e1.request(`${EXECUTOR_JS_API_PREFIX}.CONSUMER.INFO.${STREAMS.candidates}.cand-s1`, new Uint8Array(), { timeout: 5_000 });
    await e1.request(subjects.claim("s1", "e1"), encode({ assignment_id: "x", executor_id: "e1", generation: 0 }), { timeout: 5_000 });
    await e1.request(subjects.presence("s1", "e1"), encode({}), { timeout: 5_000 });
    const barrier = await kv.put("barrier", "after the probes");
    expect(barrier, "nothing was written to the bucket between the probe entry and the barrier").toBe(revision + 1);
    const entry = await kv.get("probe");
    expect(entry?.string()).toBe("original");
    expect(entry?.revision).toBe(revision);
    await kv.delete("probe");
    await kv.delete("barrier");
  });

  it("keeps executors of another scope working while one misbehaves", async () => {
    const other = new ProtocolExecutor(e2, "s2", "e2", ["b2"], { register: false });
    expect((await other.heartbeat()).status).toBe("ok");
    other.close();
  });

  const toolCall = async (tool: "tasks.read" | "tasks.create") => {
    const run = (await gw.http("POST", `/v1/sessions/${sessionId}/runs`)).body.run_id;
    return (await gw.http("POST", `/v1/runs/${run}/tool-calls`, { tool_name: tool, arguments: {} })).body.assignment.assignment_id as string;
  };

  it("refuses, at the gateway, an executor the server admits but the registry does not know: executor_unknown", async () => {
    const nc = await executorConnection("s1", "ghost", keys.ghost);
    const ghost = new ProtocolExecutor(nc, "s1", "ghost", ["b1"], { register: false });
    try {
      expect(await ghost.heartbeat()).toMatchObject({ status: "refused", code: "executor_unknown" });
      const id = await toolCall("tasks.read");
      expect(await ghost.claim(id, 0)).toMatchObject({ status: "refused", code: "executor_unknown" });
      expect((await gw.http("GET", `/v1/assignments/${id}`)).body.state).toBe("pending");
    } finally {
      ghost.close();
      await nc.close();
    }
  });

  it("refuses a binding the heartbeat declares beyond the registration: binding_not_granted", async () => {
    const greedy = new ProtocolExecutor(e1, "s1", "e1", ["b1w", "b1"], { register: false });
    const honest = new ProtocolExecutor(e1, "s1", "e1", ["b1"], { register: false });
    try {
      expect(await greedy.heartbeat()).toMatchObject({ status: "refused", code: "binding_not_granted" });
      expect((await honest.heartbeat()).status).toBe("ok");
      const id = await toolCall("tasks.create");
      expect(await honest.claim(id, 0)).toMatchObject({ status: "refused", code: "binding_not_granted" });
      expect((await gw.http("GET", `/v1/assignments/${id}`)).body.state).toBe("pending");
    } finally {
      greedy.close();
      honest.close();
    }
  });

  it("refuses an executor whose registered nkey is not the one it connected with: identity_mismatch", async () => {
    const e3exec = new ProtocolExecutor(e3, "s1", "e3", ["b1"], { register: false });
    // The gateway's own registry: its view has the change at once (another replica's once its watch delivered it).
    const registry = gw.gateway.executors;
    try {
      expect((await e3exec.heartbeat()).status).toBe("ok");
      // Rotated in the registry, the server config not regenerated yet: the old key still connects, but no longer claims.
      await registry.setNkeys("e3", [nkeys.createUser().getPublicKey()]);
      const id = await toolCall("tasks.read");
      expect(await e3exec.claim(id, 0)).toMatchObject({ status: "refused", code: "identity_mismatch" });
      expect(await e3exec.heartbeat()).toMatchObject({ status: "refused", code: "identity_mismatch" });
      // The old key listed again (a rotation's first step): accepted once more.
      await registry.setNkeys("e3", [keys.e3.getPublicKey()]);
      expect((await e3exec.heartbeat()).status).toBe("ok");
    } finally {
      e3exec.close();
    }
  });
});
