import { connect, type NatsConnection } from "@nats-io/transport-node";
import { Kvm } from "@nats-io/kv";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_BYTES_PER_TOKEN } from "../../src/context/estimator.js";
import { startTestNats, type TestNats } from "../helpers/nats.js";
import { completeToolCall, startExecutionGateway, type TestGateway } from "../helpers/execution-gateway.js";
import { ProtocolExecutor } from "../helpers/protocol-executor.js";

const SCOPE = "ctx";
const TOOL = "pages.read";

/** A page of `n` items, about 60 bytes each: over the tool's 4 KiB budget from about 70 items. */
const page = (n: number) => ({
  status: "ok",
  next_cursor: `after-${n}`,
  items: Array.from({ length: n }, (_, i) => ({ id: `item-${i}`, text: "y".repeat(32) })),
});

describe("context window: usage calibration and the compaction decision", () => {
  let nats: TestNats;
  let gw: TestGateway;
  let nc: NatsConnection;
  let executor: ProtocolExecutor;
  /** One session per agent: `calib` (window 100,000 tokens), `tight` (1,000), `other` and `busy` (100,000). */
  const sessions: Record<string, string> = {};

  const ok = async (method: string, path: string, body?: unknown) => {
    const res = await gw.http(method, path, body);
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  };
  const newRun = async (agent: string): Promise<string> => (await ok("POST", `/v1/sessions/${sessions[agent]}/runs`)).run_id;
  const usage = (runId: string, body: Record<string, unknown>) => ok("POST", `/v1/runs/${runId}/usage`, body);
  const context = (runId: string) => ok("GET", `/v1/runs/${runId}/context`);
  const complete = (runId: string, result: unknown) => completeToolCall(gw, executor, runId, TOOL, result);

  beforeAll(async () => {
    nats = await startTestNats();
    gw = await startExecutionGateway(nats.url);
    await ok("POST", "/v1/bindings", { binding_id: "b-pages", executor_scope: SCOPE, tool_kind: "read" });
    const tool = {
      name: TOOL,
      description: "Read a page",
      binding_id: "b-pages",
      input_schema: { type: "object" },
      output_schema: { type: "object" },
      max_result_context_bytes: 4096,
    };
    await ok("POST", "/v1/toolsets/pages/versions", { version: "v1", tools: [tool] });
    for (const [agent, max] of [
      ["calib", 100_000],
      ["tight", 1_000],
      ["other", 100_000],
      ["busy", 100_000],
    ] as const) {
      const version = await ok("POST", `/v1/agents/${agent}/versions`, { toolset: "pages", toolset_version: "v1", max_context_tokens: max });
      sessions[agent] = (await ok("POST", "/v1/sessions", { agent_version: version.agent_version, subject: "user-1" })).session_id;
    }
    nc = await connect({ servers: nats.url });
    executor = new ProtocolExecutor(nc, SCOPE, "exec-ctx", ["b-pages"]);
  });
  afterAll(async () => {
    executor?.close();
    await nc?.close();
    await gw?.close();
    await nats?.stop();
  });

  it("counts the stored projections the model sees, with the conservative default before any report", async () => {
    const runId = await newRun("calib");
    expect(await context(runId)).toMatchObject({ bytes: 0, estimated_tokens: 0, must_compact: false, calibrated_from: 0, max_context_tokens: 100_000 });
    await complete(runId, page(0));
    await complete(runId, page(500)); // ~30 KiB, projected to at most 4 KiB
    const calls = (await ok("GET", `/v1/runs/${runId}/history`)).tool_calls;
    expect(calls[1].context_preview.truncated).toBe(true);
    const projected = calls.reduce((sum: number, c: { context_preview: { retained_bytes: number } }) => sum + c.context_preview.retained_bytes, 0);
    expect(await context(runId)).toEqual({
      run_id: runId,
      agent_version: "calib.1",
      bytes: projected,
      history_bytes: projected,
      prompt_text_bytes: 0,
      compacted_tool_calls: 0,
      estimated_tokens: Math.ceil(projected / DEFAULT_BYTES_PER_TOKEN),
      max_context_tokens: 100_000,
      bytes_per_token: DEFAULT_BYTES_PER_TOKEN,
      calibrated_from: 0,
      must_compact: false,
    });
  });

  it("converges on a known bytes-per-token ratio from synthetic usage with outliers, per agent version", async () => {
    const TRUE_RATIO = 3.6;
    const runId = await newRun("calib");
    await complete(runId, page(200));
    const history = (await context(runId)).history_bytes;
    let last;
    for (let i = 0; i < 48; i++) {
      const promptTextBytes = 2_000 + 137 * i;
      const tokens = Math.round((history + promptTextBytes) / TRUE_RATIO);
      // Every fifth call is skewed: image tokens the bytes do not show (x4), or a cached prefix (/3).
      const reported = i % 5 === 2 ? tokens * 4 : i % 5 === 4 ? Math.round(tokens / 3) : tokens;
      last = await usage(runId, { input_tokens: reported, prompt_text_bytes: promptTextBytes });
    }
    expect(last.calibrated_from).toBe(48);
    expect(Math.abs(last.bytes_per_token - TRUE_RATIO) / TRUE_RATIO).toBeLessThan(0.01);
    expect(last).toMatchObject({ bytes: history + 2_000 + 137 * 47, prompt_text_bytes: 2_000 + 137 * 47 });
    expect(last.estimated_tokens).toBe(Math.ceil(last.bytes / last.bytes_per_token));

    // Another agent version has its own calibration; a new run of the same one shares it.
    expect(await context(await newRun("other"))).toMatchObject({ bytes_per_token: DEFAULT_BYTES_PER_TOKEN, calibrated_from: 0 });
    expect((await context(await newRun("calib"))).bytes_per_token).toBe(last.bytes_per_token);
  });

  it("takes in concurrent reports without losing one (compare-and-set)", async () => {
    const runId = await newRun("busy");
    await Promise.all(Array.from({ length: 20 }, () => usage(runId, { input_tokens: 250, prompt_text_bytes: 1_000 })));
    expect(await context(runId)).toMatchObject({ calibrated_from: 20, bytes_per_token: 4 });
  });

  it("must compact exactly when the estimate passes max_context_tokens, and no longer once the runtime compacted", async () => {
    const runId = await newRun("tight"); // max_context_tokens 1,000
    await complete(runId, page(0));
    const history = (await context(runId)).history_bytes;
    // Calibrate to exactly 4 bytes per token.
    for (const tokens of [500, 600, 700]) await usage(runId, { input_tokens: tokens, prompt_text_bytes: 4 * tokens - history });
    const atLimit = await usage(runId, { input_tokens: 1_000, prompt_text_bytes: 4_000 - history });
    expect(atLimit).toMatchObject({ bytes: 4_000, bytes_per_token: 4, estimated_tokens: 1_000, must_compact: false });
    const over = await usage(runId, { input_tokens: 1_001, prompt_text_bytes: 4_001 - history });
    expect(over).toMatchObject({ bytes: 4_001, estimated_tokens: 1_001, must_compact: true });
    await usage(runId, { input_tokens: 1_000, prompt_text_bytes: 4_000 - history });
    expect((await context(runId)).must_compact).toBe(false);

    // A new result in history is counted at once, without a report.
    await complete(runId, { next_cursor: "p3" });
    const grown = await context(runId);
    expect(grown.history_bytes).toBeGreaterThan(history);
    expect(grown.must_compact).toBe(true);

    // The runtime compacts both results into a short summary: their projections no longer count.
    const compacted = await usage(runId, { input_tokens: 300, prompt_text_bytes: 1_200, compacted_tool_calls: 2 });
    expect(compacted).toMatchObject({ history_bytes: 0, bytes: 1_200, compacted_tool_calls: 2, estimated_tokens: 300, must_compact: false });
    // compacted_tool_calls never goes back.
    expect(await usage(runId, { input_tokens: 300, prompt_text_bytes: 1_200 })).toMatchObject({ compacted_tool_calls: 2, history_bytes: 0 });
  });

  it("never regenerates a stored projection", async () => {
    const runId = await newRun("calib");
    await complete(runId, page(300));
    await complete(runId, page(3));
    // Where projections are stored: the records that completed the calls (store layout 2) and the projections bucket (layout 1).
    const buckets = await Promise.all(["tg_assignments", "tg_projections"].map(async (name) => ({ name, kv: await new Kvm(nc).open(name) })));
    const snapshot = async () => {
      const entries: Record<string, { revision: number; value: string }> = {};
      const values: number[] = [];
      for (const { name, kv } of buckets) {
        for await (const key of await kv.keys()) {
          const entry = await kv.get(key);
          if (entry) entries[`${name}.${key}`] = { revision: entry.revision, value: Buffer.from(entry.value).toString("base64") };
        }
        values.push((await kv.status()).values);
      }
      return { entries, values };
    };
    const history = async () => (await ok("GET", `/v1/runs/${runId}/history`)).tool_calls.map((c: { context_preview: unknown }) => c.context_preview);
    const [before, historyBefore] = [await snapshot(), await history()];
    expect(Object.keys(before.entries).length).toBeGreaterThanOrEqual(2);

    for (let i = 0; i < 5; i++) {
      await usage(runId, { input_tokens: 900 + i, prompt_text_bytes: 3_000, compacted_tool_calls: i === 4 ? 1 : 0 });
      await context(runId);
    }
    expect(await snapshot()).toEqual(before);
    expect(await history()).toEqual(historyBefore);
  });

  it("answers bad reports with structured errors", async () => {
    const runId = await newRun("calib");
    const bad = async (body: unknown) => (await gw.http("POST", `/v1/runs/${runId}/usage`, body)).body.error;
    expect((await bad({ input_tokens: 0, prompt_text_bytes: 10 })).details).toEqual([expect.objectContaining({ path: "input_tokens", code: "too_small" })]);
    expect((await bad({ input_tokens: 10 })).details).toEqual([expect.objectContaining({ path: "prompt_text_bytes" })]);
    expect((await bad({ input_tokens: 10, prompt_text_bytes: 10, prompt_bytes: 10 })).details).toEqual([
      expect.objectContaining({ path: "prompt_bytes", code: "unknown_field" }),
    ]);
    expect(await bad({ input_tokens: 10, prompt_text_bytes: 10, compacted_tool_calls: 1 })).toMatchObject({
      code: "validation_failed",
      details: [{ path: "compacted_tool_calls", code: "too_big", allowed: "0..0" }],
    });
    const missing = await gw.http("GET", "/v1/runs/run_missing/context");
    expect([missing.status, missing.body.error.code]).toEqual([404, "run_not_found"]);
  });
});
