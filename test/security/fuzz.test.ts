import { afterAll, beforeAll, describe, expect, it } from "vitest";
import fc from "fast-check";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { Packr } from "msgpackr";
import { ErrorBodySchema } from "../../src/http/errors.js";
import type { RouteDef } from "../../src/http/route.js";
import { ClaimReply } from "../../src/wire/messages.js";
import { decode } from "../../src/wire/codec.js";
import { executorInboxPrefix, subjects } from "../../src/wire/subjects.js";
import { startTestNats, streamWatermarks, type TestNats } from "../helpers/nats.js";
import { ADMIN_KEY, seedSession } from "../helpers/execution-gateway.js";
import { ProtocolExecutor } from "../helpers/protocol-executor.js";
import { until } from "../helpers/until.js";
import { startCapturedGateway, type CapturedGateway } from "./helpers.js";
import { RECEIPT_CONSUMER, STREAMS } from "../../src/streams/names.js";

/**
 * Garbage at the receipt and claim subjects and at every declared HTTP route (the list comes from the
 * gateway's own route declarations, so a new route is fuzzed without touching this file). Afterwards
 * no stream or bucket moved, apart from the receipts stream that keeps what was sent as audit, and a
 * normal round trip still works.
 */
const SCOPE = "fuzz";
const SEED = Number(process.env.FUZZ_SEED ?? 20261202);
const NATS_MESSAGES = 6_000;
const HTTP_REQUESTS_PER_ROUTE = 60;
const raw = new Packr({ useRecords: false, mapsAsObjects: true });

const nest = (depth: number): unknown => {
  let v: unknown = 1;
  for (let i = 0; i < depth; i++) v = i % 2 ? [v] : { a: v };
  return v;
};

const hostileValue = fc.oneof(
  fc.anything({ withNullPrototype: true, withTypedArray: true, withBigInt: false, withMap: true, withSet: true, withDate: true }),
  fc.constantFrom(Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, -0, 2 ** 60),
  fc.integer({ min: 60, max: 3_000 }).map(nest),
  fc.string({ unit: "binary", maxLength: 64 }),
);

const hostileId = fc.oneof(
  fc.constant("a".repeat(100_000)),
  fc.string({ maxLength: 300 }),
  fc.constant("x.y"),
  fc.constant("*"),
  fc.constant(">"),
  fc.constant(""),
);

/** Something that looks like a receipt, with at least one field wrong. */
const nearReceipt = (assignmentId: string) =>
  fc.record(
    {
      receipt_id: fc.oneof(hostileId, fc.uuid()),
      assignment_id: fc.oneof(fc.constant(assignmentId), hostileId),
      executor_id: fc.oneof(fc.constant("exec-1"), hostileId),
      claim_token: fc.oneof(fc.string({ maxLength: 200 }), fc.constant(undefined), fc.integer()),
      kind: fc.constantFrom("accepted", "progress", "completed", "failed", "cancelled", "reconciliation_required", "granted", 7),
      result: hostileValue,
      seq: fc.oneof(fc.integer(), fc.double()),
      operation_key: fc.oneof(fc.string(), hostileValue),
      unknown_field: fc.option(hostileValue),
    },
    { requiredKeys: [] },
  );

const nearClaim = fc.record(
  {
    assignment_id: hostileId,
    executor_id: fc.oneof(fc.constant("ghost"), hostileId),
    generation: fc.oneof(fc.integer(), fc.double(), fc.string()),
    extra: hostileValue,
  },
  { requiredKeys: [] },
);

/** msgpack of a hostile value; one the packer itself cannot take becomes the byte msgpack never uses. */
const pack = (v: unknown): Uint8Array => {
  try {
    return raw.pack(v);
  } catch {
    return new Uint8Array([0xc1]);
  }
};

const payload = (structured: fc.Arbitrary<unknown>) => fc.oneof(fc.uint8Array({ maxLength: 4_096 }), structured.map(pack), hostileValue.map(pack));

describe("fuzz: malformed NATS messages and HTTP bodies change nothing", () => {
  let nats: TestNats;
  let gw: CapturedGateway;
  let nc: NatsConnection;
  let exec: ProtocolExecutor;
  let sessionId: string;
  let doneAssignment: string;

  const http = (method: string, url: string, body?: string | Buffer, headers: Record<string, string> = {}) =>
    gw.gateway.app.inject({
      method: method as "GET",
      url,
      headers: { authorization: `Bearer ${ADMIN_KEY}`, ...headers },
      ...(body === undefined ? {} : { payload: body }),
    });

  const roundTrip = async (): Promise<string> => {
    const run = JSON.parse((await http("POST", `/v1/sessions/${sessionId}/runs`)).body).run_id;
    const created = await http("POST", `/v1/runs/${run}/tool-calls`, JSON.stringify({ tool_name: "tasks.read", arguments: { cursor: "c" } }), {
      "content-type": "application/json",
    });
    const id = JSON.parse(created.body).assignment.assignment_id;
    const candidate = await exec.pullFor(id);
    const reply = await exec.claim(id, candidate.generation);
    if (reply.status !== "granted") throw new Error(reply.reason);
    expect((await exec.send(exec.accepted(reply.grant))).status).toBe("recorded");
    expect((await exec.send(exec.receipt(reply.grant, { kind: "completed", result: { ok: true } }))).status).toBe("recorded");
    const history = JSON.parse((await http("GET", `/v1/runs/${run}/history`)).body);
    expect(history.tool_calls).toHaveLength(1);
    return id;
  };

  beforeAll(async () => {
    nats = await startTestNats();
    gw = await startCapturedGateway(nats.url, { TOOLGATE_RATE_LIMIT_RPS: "1000000", TOOLGATE_RATE_LIMIT_BURST: "1000000" });
    sessionId = await seedSession(gw.gateway.store, { scope: SCOPE, agent: "fuzz-bot", tools: [{ name: "tasks.read", binding_id: "b-fuzz" }] });
    nc = await connect({ servers: nats.url, inboxPrefix: executorInboxPrefix(SCOPE, "exec-1") });
    exec = new ProtocolExecutor(nc, SCOPE, "exec-1", ["b-fuzz"]);
    expect((await exec.heartbeat()).status).toBe("ok");
    doneAssignment = await roundTrip();
  });
  afterAll(async () => {
    exec?.close();
    await nc?.close();
    await gw?.close();
    await nats?.stop();
  });

  /** The gateway's own count on a counter, summed over the series whose labels `match`. */
  const counted = async (name: string, match: (labels: Record<string, string | number>) => boolean = () => true): Promise<number> => {
    const metric = gw.gateway.metrics.registry.getSingleMetric(name);
    if (!metric) throw new Error(`no metric ${name}`);
    return (await metric.get()).values.filter((v) => match(v.labels as Record<string, string | number>)).reduce((sum, v) => sum + v.value, 0);
  };
  const gatewayCounts = async () => ({
    receipts: await counted("toolgate_receipts_total"),
    receiptsRecorded: await counted("toolgate_receipts_total", (l) => l.status === "recorded"),
    claimsGranted: await counted("toolgate_claims_total", (l) => l.outcome === "granted"),
    claimRefusals: await counted("toolgate_request_refusals_total", (l) => l.request === "claim"),
  });

  it(`survives ${NATS_MESSAGES} malformed receipts and claims and ${HTTP_REQUESTS_PER_ROUTE} bodies per route`, { timeout: 120_000 }, async () => {
    const before = await streamWatermarks(nc, [STREAMS.receipts]);
    const countsBefore = await gatewayCounts();
    const js = jetstream(nc);
    const jsm = await jetstreamManager(nc);
    const receiptsBefore = (await jsm.streams.info(STREAMS.receipts)).state.last_seq;

    const receipts = fc.sample(
      fc.tuple(
        fc.constantFrom(SCOPE, "other", "x"),
        fc.constantFrom("exec-1", "exec-2"),
        fc.constantFrom(doneAssignment, "a-random"),
        payload(nearReceipt(doneAssignment)),
      ),
      { numRuns: NATS_MESSAGES / 2, seed: SEED },
    );
    const claims = fc.sample(payload(nearClaim), { numRuns: NATS_MESSAGES / 2, seed: SEED + 1 });
    for (let i = 0; i < receipts.length; i += 200) {
      const acks = receipts
        .slice(i, i + 200)
        .map(([scope, executor, assignment, data], j) => js.publish(subjects.receipt(scope, executor, assignment), data, { msgID: `fuzz-${i + j}` }));
      await Promise.all(acks);
    }
    for (let i = 0; i < claims.length; i += 200) {
      const replies = await Promise.all(claims.slice(i, i + 200).map((data) => nc.request(subjects.claim(SCOPE, "exec-1"), data, { timeout: 10_000 })));
      for (const r of replies) expect(decode(ClaimReply, r.data).status).toBe("refused");
    }

    // Every route, as declared: random path tokens, random bodies, hostile encodings.
    const bodies = fc.oneof(
      fc.jsonValue().map((v) => ({ body: JSON.stringify(v) as string | Buffer, type: "application/json" })),
      fc.uint8Array({ maxLength: 2_048 }).map((b) => ({ body: Buffer.from(b) as string | Buffer, type: "application/json" })),
      fc.integer({ min: 65, max: 5_000 }).map((d) => ({ body: ("[".repeat(d) + "]".repeat(d)) as string | Buffer, type: "application/json" })),
      fc.constant({ body: Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]) as string | Buffer, type: "application/json" }),
      fc.constant({ body: '{"__proto__":{"admin":true}}' as string | Buffer, type: "application/json" }),
      fc.string().map((s) => ({ body: s as string | Buffer, type: "text/plain" })),
    );
    const routes: readonly RouteDef[] = gw.gateway.routes;
    const statuses = new Map<number, number>();
    for (const route of routes) {
      const samples = fc.sample(fc.tuple(fc.stringMatching(/^[A-Za-z0-9_-]{1,40}$/), bodies), {
        numRuns: HTTP_REQUESTS_PER_ROUTE,
        seed: SEED + route.id.length,
      });
      for (const [token, { body, type }] of samples) {
        const url = route.path.replace(/\{\w+\}/g, `fz${token}`);
        const res = await http(route.method, url, route.method === "GET" ? undefined : body, route.method === "GET" ? {} : { "content-type": type });
        statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
        expect(res.statusCode, `${route.method} ${url}: ${res.body}`).toBeLessThan(500);
        if (res.statusCode >= 400) expect(ErrorBodySchema.safeParse(JSON.parse(res.body)).success).toBe(true);
      }
    }
    const big = await http("POST", "/v1/bindings", Buffer.alloc(5 * 1024 * 1024, 0x20), { "content-type": "application/json" });
    expect(big.statusCode).toBe(413);
    expect(JSON.parse(big.body).error).toMatchObject({
      code: "payload_too_large",
      message: expect.stringContaining("larger than 4 MiB"),
      details: [{ path: "body", code: "too_big", allowed: `0..${4 * 1024 * 1024} bytes` }],
    });

    // The consumer got through all of it (never stuck), and nothing moved but the receipts' audit.
    await until(
      "receipt consumer drained",
      async () => {
        const info = await jsm.consumers.info(STREAMS.receipts, RECEIPT_CONSUMER);
        return info.num_pending === 0 && info.num_ack_pending === 0 ? true : undefined;
      },
      60_000,
    );
    expect((await jsm.streams.info(STREAMS.receipts)).state.last_seq).toBe(receiptsBefore + receipts.length);
    expect(await streamWatermarks(nc, [STREAMS.receipts])).toEqual(before);
    // What the gateway did, by its own counters: every receipt answered (or terminated) and none recorded;
    // every claim refused by this gateway's responder, none granted.
    const countsAfter = await gatewayCounts();
    const did = Object.fromEntries(Object.entries(countsAfter).map(([k, v]) => [k, v - countsBefore[k as keyof typeof countsBefore]]));
    expect(did).toEqual({ receipts: receipts.length, receiptsRecorded: 0, claimsGranted: 0, claimRefusals: claims.length });
    expect(gw.lines.some((l) => l.includes('"level":50') && l.includes("unhandled"))).toBe(false);
    console.log(`fuzz seed ${SEED}: the gateway did ${JSON.stringify(did)}, HTTP statuses ${JSON.stringify(Object.fromEntries(statuses))}`);

    expect((await exec.heartbeat()).status).toBe("ok"); // the presence TTL may have run out meanwhile
    await roundTrip();
  });
});
