import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { headers, type NatsConnection } from "@nats-io/transport-node";
import { decode, encode } from "../../../src/wire/codec.js";
import { ClaimReply, ControlQueryResult, HeldClaimsReply, PresenceReply, ReceiptQueryReply } from "../../../src/wire/messages.js";
import { PROTOCOL_VERSION_HEADER } from "../../../src/wire/protocol-version.js";
import { subjects } from "../../../src/wire/subjects.js";
import { startExecutionFixture, type ExecutionFixture, type TestGateway } from "../../helpers/execution-gateway.js";
import type { ProtocolExecutor } from "../../helpers/protocol-executor.js";

/**
 * The `Tg-Protocol` header on every request subject of a real gateway: absent (a hand-written
 * executor) or `1` is served, `2` is refused with `protocol_version_unsupported` and counted.
 */
const SCOPE = "protover";
const EXECUTOR = "exec-v";

describe("the protocol-version header on the request subjects", () => {
  let fx: ExecutionFixture, gw: TestGateway, nc: NatsConnection, exec: ProtocolExecutor, sessionId: string;
  beforeAll(async () => {
    fx = await startExecutionFixture({
      scope: SCOPE,
      agent: "versioned",
      tools: [{ name: "tasks.read", binding_id: "b-ver" }],
      executor: { id: EXECUTOR, start: "register" },
    });
    ({ gw, nc, executor: exec, sessionId } = fx);
  });
  afterAll(() => fx?.close());

  /** One request with the header set to `version`, or without it. */
  const request = async (subject: string, body: unknown, version: string | undefined): Promise<Uint8Array> => {
    const h = headers();
    if (version !== undefined) h.set(PROTOCOL_VERSION_HEADER, version);
    return (await nc.request(subject, encode(body), { timeout: 5_000, ...(version !== undefined ? { headers: h } : {}) })).data;
  };
  const refusals = async (code: string): Promise<Record<string, number>> => {
    const metric = gw.gateway.metrics.registry.getSingleMetric("toolgate_request_refusals_total");
    if (!metric) throw new Error("no refusal metric");
    const values = (await metric.get()).values.filter((v) => v.labels.code === code);
    return Object.fromEntries(values.map((v) => [String(v.labels.request), v.value]));
  };
  const newToolCall = async (): Promise<string> => {
    const run = (await gw.api("POST", `/v1/sessions/${sessionId}/runs`)).run_id as string;
    return (await gw.api("POST", `/v1/runs/${run}/tool-calls`, { tool_name: "tasks.read", arguments: {} })).assignment.assignment_id as string;
  };

  const beat = { executor_id: EXECUTOR, scope: SCOPE, bindings: ["b-ver"], status: "online", in_flight: 0 };
  const query = { receipt_id: "rc-unknown", assignment_id: "a-unknown", executor_id: EXECUTOR, kind: "completed", body_digest: "0".repeat(64) };
  const control = { executor_id: EXECUTOR, since: 0 };
  /** The claims this executor holds, for its held-claims reports (a report leaving one out would detach it). */
  const held: Array<{ assignment_id: string; generation: number }> = [];
  const report = () => ({ executor_id: EXECUTOR, scope: SCOPE, held });

  for (const version of [undefined, "1"]) {
    it(`serves every request ${version === undefined ? "without the header" : `with ${PROTOCOL_VERSION_HEADER}: ${version}`}`, async () => {
      expect(decode(PresenceReply, await request(subjects.presence(SCOPE, EXECUTOR), beat, version))).toMatchObject({ status: "ok" });
      const id = await newToolCall();
      const candidate = await exec.pullFor(id);
      const claim = decode(
        ClaimReply,
        await request(subjects.claim(SCOPE, EXECUTOR), { assignment_id: id, executor_id: EXECUTOR, generation: candidate.generation }, version),
      );
      expect(claim.status).toBe("granted");
      held.push({ assignment_id: id, generation: candidate.generation });
      const detached = decode(HeldClaimsReply, await request(subjects.heldClaims(SCOPE, EXECUTOR), report(), version));
      expect(detached).toEqual({ status: "ok", released: [], reconciliation_required: [], retried: [] });
      expect(decode(ReceiptQueryReply, await request(subjects.receiptQuery(SCOPE, EXECUTOR), query, version))).toMatchObject({ status: "pending" });
      expect(decode(ControlQueryResult, await request(subjects.controlQuery(SCOPE, EXECUTOR), control, version))).toMatchObject({ messages: [], more: false });
    });
  }

  it(`refuses every request with ${PROTOCOL_VERSION_HEADER}: 2 as protocol_version_unsupported, and counts it`, async () => {
    const before = await refusals("protocol_version_unsupported");
    const refused = { status: "refused", code: "protocol_version_unsupported", reason: expect.stringContaining("'2'") };
    expect(decode(PresenceReply, await request(subjects.presence(SCOPE, EXECUTOR), beat, "2"))).toMatchObject(refused);
    // A real candidate: only the version stands between this claim and its grant.
    const id = await newToolCall();
    const candidate = await exec.pullFor(id);
    expect(
      decode(ClaimReply, await request(subjects.claim(SCOPE, EXECUTOR), { assignment_id: id, executor_id: EXECUTOR, generation: candidate.generation }, "2")),
    ).toMatchObject(refused);
    expect(decode(ReceiptQueryReply, await request(subjects.receiptQuery(SCOPE, EXECUTOR), query, "2"))).toMatchObject(refused);
    expect(decode(ControlQueryResult, await request(subjects.controlQuery(SCOPE, EXECUTOR), control, "2"))).toMatchObject(refused);
    expect(decode(HeldClaimsReply, await request(subjects.heldClaims(SCOPE, EXECUTOR), report(), "2"))).toMatchObject(refused);
    // Refused before the body is read: a body of another version need not decode.
    expect(decode(ClaimReply, await request(subjects.claim(SCOPE, EXECUTOR), { a_field_of_v2: true }, "2"))).toMatchObject(refused);

    const after = await refusals("protocol_version_unsupported");
    const counted = Object.fromEntries(Object.entries(after).map(([request, n]) => [request, n - (before[request] ?? 0)]));
    expect(counted).toEqual({ presence: 1, claim: 2, rq: 1, ctlq: 1, held: 1 });
    // The claim was never made: the same executor, speaking version 1, is granted it.
    expect((await exec.claim(id, candidate.generation)).status).toBe("granted");
  });
});
