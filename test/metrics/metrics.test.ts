import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { AckPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { createGateway, type Gateway } from "../../src/gateway/gateway.js";
import { gatewayConfigFromEnv } from "../../src/gateway/config.js";
import { createLogger } from "../../src/log/logger.js";
import { GatewayMetrics } from "../../src/metrics/metrics.js";
import { DefinitionSchema, loadDefinitions } from "../../src/streams/index.js";
import { startTestNats, type TestNats } from "../helpers/nats.js";
import { admin, ADMIN_KEY, bearer } from "../helpers/gateway.js";
import { until } from "../helpers/until.js";

/** The value of one sample line of the exposition, e.g. `toolgate_nats_connected` or `name{a="b"}`. */
function sample(text: string, series: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(series + " "));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe("/metrics", () => {
  let nats: TestNats;
  let nc: NatsConnection;
  const gateways: Gateway[] = [];
  const dirs: string[] = [];
  // A declared stream with a consumer, so the consumer gauges have something to report.
  const definitions = [
    ...loadDefinitions(),
    DefinitionSchema.parse({ kind: "stream", name: "T_METRICS", subjects: ["t.metrics.>"] }),
    DefinitionSchema.parse({ kind: "consumer", stream: "T_METRICS", durable_name: "probe", ack_wait_ms: 60_000 }),
  ];
  const start = async (env: Record<string, string> = {}) => {
    const dir = mkdtempSync(join(tmpdir(), "toolgate-metrics-"));
    dirs.push(dir);
    const config = gatewayConfigFromEnv({
      NATS_URL: nats.url,
      TOOLGATE_HTTP_PORT: "0",
      TOOLGATE_DATA_DIR: dir,
      TOOLGATE_IDENTITIES: JSON.stringify([admin]),
      ...env,
    });
    const gw = await createGateway({ config, definitions, logger: createLogger({ level: "silent" }) });
    gateways.push(gw);
    return gw;
  };
  const scrape = async (gw: Gateway) => {
    const res = await gw.app.inject({ method: "GET", url: "/metrics" });
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toMatch(/^text\/plain; version=0\.0\.4/);
    return res.body;
  };

  beforeAll(async () => {
    nats = await startTestNats();
    nc = await connect({ servers: nats.url });
  });
  afterAll(async () => {
    for (const gw of gateways) await gw.close();
    await nc?.close();
    await nats?.stop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it("is served on the API port without authentication, with NATS, JetStream and process metrics", async () => {
    const gw = await start();
    const text = await scrape(gw);
    expect(sample(text, "toolgate_nats_connected")).toBe(1);
    expect(sample(text, "toolgate_jetstream_info_up")).toBe(1);
    expect(sample(text, 'toolgate_stream_messages{stream="KV_tg_config"}')).toBe(0);
    expect(text).toContain("# TYPE process_cpu_seconds_total counter");
    expect(text).toContain("# TYPE toolgate_receipts_total counter");
    expect(text).toContain("# TYPE toolgate_claim_latency_seconds histogram");
  });

  it("counts HTTP requests by route template, never by raw URL", async () => {
    const gw = await start();
    for (const id of ["a", "b", "c"]) await gw.app.inject({ method: "GET", url: `/v1/bindings/${id}`, headers: bearer(ADMIN_KEY) });
    await gw.app.inject({ method: "GET", url: "/v1/bindings/a" });
    const text = await scrape(gw);
    expect(sample(text, 'toolgate_http_request_duration_seconds_count{method="GET",route="/v1/bindings/:binding_id",status_code="404"}')).toBe(3);
    expect(sample(text, 'toolgate_http_request_duration_seconds_count{method="GET",route="/v1/bindings/:binding_id",status_code="401"}')).toBe(1);
    expect(text).not.toContain("/v1/bindings/a");
  });

  it("reports consumer pending, ack pending and redelivered counts, read from JetStream on scrape", async () => {
    const gw = await start();
    const js = jetstream(nc);
    const consumer = await js.consumers.get("T_METRICS", "probe");
    await js.publish("t.metrics.1", "1");
    (await consumer.next())!.nak(); // the only message: the next pull redelivers it
    expect((await consumer.next())!.info.deliveryCount).toBe(2);
    for (const n of [2, 3]) await js.publish(`t.metrics.${n}`, String(n));
    // An ephemeral consumer (as a bucket listing makes) is not exported: its random name would churn series.
    const ephemeral = await jetstreamManager(nc).then((jsm) =>
      jsm.consumers.add("T_METRICS", { ack_policy: AckPolicy.None, inactive_threshold: 60_000_000_000 }),
    );
    const text = await scrape(gw);
    const labels = '{stream="T_METRICS",consumer="probe"}';
    expect(sample(text, `toolgate_consumer_pending_messages${labels}`)).toBe(2);
    expect(sample(text, `toolgate_consumer_ack_pending_messages${labels}`)).toBe(1);
    expect(sample(text, `toolgate_consumer_redelivered_messages${labels}`)).toBe(1);
    expect(sample(text, 'toolgate_stream_messages{stream="T_METRICS"}')).toBe(3);
    expect(text).not.toContain(ephemeral.name);
  });

  it("keeps one registry per gateway: two gateways in a process never share counters", async () => {
    const [one, two] = [await start(), await start()];
    one.metrics.receiptProcessed("recorded", "completed");
    one.metrics.receiptProcessed("late_ignored", "progress");
    one.metrics.projectionStored(true);
    one.metrics.assignmentWritten(undefined, { state: "pending", updated_at: 1_000 });
    one.metrics.assignmentWritten({ state: "pending", updated_at: 1_000 }, { state: "pending", updated_at: 2_000 }); // candidate published
    one.metrics.assignmentWritten({ state: "pending", updated_at: 2_000 }, { state: "claimed", updated_at: 3_500 });
    expect(sample(await scrape(one), 'toolgate_receipts_total{status="recorded",kind="completed"}')).toBe(1);
    expect(sample(await scrape(one), 'toolgate_projections_total{truncated="true"}')).toBe(1);
    expect(sample(await scrape(one), 'toolgate_claim_latency_seconds_bucket{le="2.5"}')).toBe(1);
    expect(sample(await scrape(one), 'toolgate_claim_latency_seconds_bucket{le="1"}')).toBe(0);
    expect(sample(await scrape(one), 'toolgate_assignments_total{state="pending"}')).toBe(1);
    expect(sample(await scrape(one), 'toolgate_assignments_total{state="claimed"}')).toBe(1);
    expect(await scrape(two)).not.toContain("toolgate_receipts_total{");
  });

  it("with TOOLGATE_METRICS_PORT moves to its own listener and leaves the API port", async () => {
    const gw = await start({ TOOLGATE_METRICS_PORT: "0" });
    await gw.listen();
    expect(gw.metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const res = await fetch(`${gw.metricsUrl}/metrics`);
    expect(res.status).toBe(200);
    expect(sample(await res.text(), "toolgate_nats_connected")).toBe(1);
    expect((await fetch(`${gw.metricsUrl}/v1/bindings`)).status).toBe(404);
    expect((await gw.app.inject({ method: "GET", url: "/metrics" })).statusCode).toBe(404);
  });

  it("documents every toolgate_ metric in docs/operations.md", () => {
    const doc = readFileSync("docs/operations.md", "utf8");
    const names = new GatewayMetrics().registry
      .getMetricsAsArray()
      .map((m) => m.name)
      .filter((n) => n.startsWith("toolgate_"));
    expect(names.length).toBeGreaterThan(10);
    for (const name of names) expect(doc, name).toContain(`| \`${name}\` |`);
  });

  it("follows the NATS connection through a server restart", async () => {
    const gw = await start();
    await nats.restart();
    const text = await until(
      "the reconnect counted",
      async () => {
        const scraped = await scrape(gw);
        return sample(scraped, "toolgate_nats_reconnects_total") === 1 ? scraped : undefined;
      },
      10_000,
      100,
    );
    expect(sample(text, "toolgate_nats_reconnects_total")).toBe(1);
    expect(sample(text, "toolgate_nats_connected")).toBe(1);
  });
});
