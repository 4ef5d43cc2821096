import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Gateway } from "../../src/gateway/gateway.js";
import { CONFIG_BUCKET } from "../../src/streams/names.js";
import { startTestNats, streamWatermarks, type TestNats } from "../helpers/nats.js";
import { buildContextPreview, canonicalJson, parseExactJson } from "../../src/budget/index.js";
import { ADMIN_KEY, admin, bearer, bindingExample, startTestGateway, tasksRead } from "../helpers/gateway.js";

const seedRequest = {
  agent_version: "bot.1",
  tool_name: "tasks.read",
  arguments: {},
  mock_receipts: [{ receipt_id: "dry-run-page-001", kind: "completed", result: { next_cursor: "page-2", tasks: [] } }],
};

/** About 200 KiB: a page of tasks with the cursor and status the model must still see. */
function bigResult() {
  const tasks = Array.from({ length: 1000 }, (_, i) => ({ id: `task-${i}`, title: `Task ${i} `.padEnd(180, "x"), done: i % 2 === 0 }));
  return { status: "ok", next_cursor: "page-2", tasks };
}

describe("POST /v1/tools/dry-run", () => {
  let nats: TestNats;
  let gw: Gateway;
  const dryRun = (body: unknown, key = ADMIN_KEY) => gw.app.inject({ method: "POST", url: "/v1/tools/dry-run", headers: bearer(key), payload: body as object });

  beforeAll(async () => {
    nats = await startTestNats();
    gw = await startTestGateway(nats.url, [
      admin,
      { name: "reader", key: "runtime-reader-key-0123", agents: ["bot"], permissions: ["runtime:read"] },
      { name: "executor", key: "tools-exec-key-0123456", agents: ["bot"], permissions: ["tools:execute"] },
    ]);
    const h = bearer(ADMIN_KEY);
    await gw.app.inject({ method: "POST", url: "/v1/bindings", headers: h, payload: bindingExample });
    await gw.app.inject({
      method: "POST",
      url: "/v1/toolsets/tasks/versions",
      headers: h,
      payload: {
        version: "v1",
        tools: [
          tasksRead,
          { ...tasksRead, name: "tasks.small", max_result_context_bytes: 1024 },
          { ...tasksRead, name: "tasks.keep", max_result_context_bytes: 1024, preserve_fields: ["meta.page.next", "tasks.3.title", "absent.path", "tasks"] },
        ],
      },
    });
    await gw.app.inject({
      method: "POST",
      url: "/v1/agents/bot/versions",
      headers: h,
      payload: { toolset: "tasks", toolset_version: "v1", max_context_tokens: 128000 },
    });
  });
  afterAll(async () => {
    await gw?.close();
    await nats?.stop();
  });

  it("previews the seed's example: 35 bytes, not truncated, execution not verified", async () => {
    const res = await dryRun(seedRequest);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({
      agent_version: "bot.1",
      tool_name: "tasks.read",
      execution_verified: false,
      context_preview: {
        max_result_context_bytes: 16384,
        original_bytes: 35,
        retained_bytes: 35,
        truncated: false,
        result: { next_cursor: "page-2", tasks: [] },
      },
    });
  });

  it("truncates a ~200 KiB result to the tool's budget, cursor visible in preserved_fields", async () => {
    const big = bigResult();
    expect(JSON.stringify(big).length).toBeGreaterThan(190 * 1024);
    const res = await dryRun({ ...seedRequest, mock_receipts: [{ receipt_id: "big", kind: "completed", result: big }] });
    const preview = res.json().context_preview;
    expect(preview.truncated).toBe(true);
    expect(preview.original_bytes).toBeGreaterThan(190 * 1024);
    expect(preview.retained_bytes).toBeLessThanOrEqual(16384);
    expect(preview.result.preserved_fields).toMatchObject({ next_cursor: "page-2", status: "ok" });
    const small = await dryRun({ ...seedRequest, tool_name: "tasks.small", mock_receipts: [{ receipt_id: "big", kind: "completed", result: big }] });
    expect(small.json().context_preview.retained_bytes).toBeLessThanOrEqual(1024);
  });

  it("keeps numbers as written and agrees byte for byte with the measured projection", async () => {
    const text = '{"id":9007199254740993,"big":1000000000000000000000,"f":[1.0,0.0,-0.0,1e16,1E-5,2.50]}';
    const res = await gw.app.inject({
      method: "POST",
      url: "/v1/tools/dry-run",
      headers: { ...bearer(ADMIN_KEY), "content-type": "application/json" },
      payload: `{"agent_version":"bot.1","tool_name":"tasks.read","mock_receipts":[{"receipt_id":"n","kind":"completed","result":${text}}]}`,
    });
    expect(res.statusCode).toBe(200);
    const python = '{"big":1000000000000000000000,"f":[1.0,0.0,-0.0,1e+16,1e-05,2.5],"id":9007199254740993}'; // json.dumps(json.loads(text), ...)
    expect(res.body).toContain(`"original_bytes":${python.length}`);
    expect(res.body).toContain(`"result":${python}`);
    expect(res.body).toContain(`"context_preview":${canonicalJson(buildContextPreview(parseExactJson(text), { maxResultContextBytes: 16384 }))}`);
  });

  it("serves the projection in the bytes measured, preserved_fields in canonical order", async () => {
    const big = bigResult();
    const res = await dryRun({ ...seedRequest, tool_name: "tasks.small", mock_receipts: [{ receipt_id: "big", kind: "completed", result: big }] });
    const measured = canonicalJson(buildContextPreview(big, { maxResultContextBytes: 1024 }));
    expect(res.body).toContain(`"context_preview":${measured}`);
    const paths = Object.keys(res.json().context_preview.result.preserved_fields);
    expect(paths).toEqual([...paths].sort());
  });

  it("keeps the tool's preserve_fields first and says which did not fit, and why", async () => {
    const big = { ...bigResult(), meta: { page: { next: "p-3" } } };
    const res = await dryRun({ ...seedRequest, tool_name: "tasks.keep", mock_receipts: [{ receipt_id: "big", kind: "completed", result: big }] });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.preserve_fields).toEqual(["meta.page.next", "tasks.3.title", "absent.path", "tasks"]);
    expect(body.context_preview.result.preserved_fields).toMatchObject({ "meta.page.next": "p-3", next_cursor: "page-2", status: "ok" });
    expect(body.unpreserved_fields).toEqual([
      { path: "tasks.3.title", reason: "too_long" },
      { path: "absent.path", reason: "absent" },
      { path: "tasks", reason: "not_a_scalar" },
    ]);
  });

  it("refuses a preserve_fields path that is not a dotted path at publish", async () => {
    const res = await gw.app.inject({
      method: "POST",
      url: "/v1/toolsets/tasks/versions",
      headers: bearer(ADMIN_KEY),
      payload: { version: "v-bad", tools: [{ ...tasksRead, preserve_fields: ["a..b"] }] },
    });
    expect(res.statusCode).toBe(400);
    expect(res.body).toMatch(/preserve_fields/);
  });

  it("uses the first completed receipt and gives null without one", async () => {
    const receipts = [
      { receipt_id: "p", kind: "progress" },
      { receipt_id: "c1", kind: "completed", result: { n: 1 } },
      { receipt_id: "c2", kind: "completed", result: { n: 2 } },
    ];
    expect((await dryRun({ ...seedRequest, mock_receipts: receipts })).json().context_preview.result).toEqual({ n: 1 });
    const none = await dryRun({ ...seedRequest, mock_receipts: [{ receipt_id: "s", kind: "submission", task_ref: "t-1", status: "queued" }] });
    expect(none.json()).toMatchObject({ context_preview: null, execution_verified: false });
    expect((await dryRun({ ...seedRequest, mock_receipts: undefined })).json().context_preview).toBeNull();
  });

  it("validates arguments against the tool's input_schema, with paths", async () => {
    const res = await dryRun({ ...seedRequest, arguments: { cursor: 5 } });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.details).toEqual([expect.objectContaining({ path: "arguments.cursor", code: "type" })]);
  });

  it("requires a published agent version and a tool of its toolset", async () => {
    const missing = await dryRun({ ...seedRequest, agent_version: "bot.7" });
    expect([missing.statusCode, missing.json().error.code]).toEqual([404, "agent_version_not_found"]);
    const tool = await dryRun({ ...seedRequest, tool_name: "tasks.write" });
    expect([tool.statusCode, tool.json().error.code]).toEqual([404, "tool_not_found"]);
    expect(tool.json().error.message).toContain("tasks.read");
    const malformed = await dryRun({ ...seedRequest, mock_receipts: [{ receipt_id: "x", kind: "done" }] });
    expect(malformed.json().error.details[0]).toMatchObject({ path: "mock_receipts[0].kind", code: "invalid_value" });
  });

  it("is open to runtime:read and tools:execute identities of the agent's scope", async () => {
    expect((await dryRun(seedRequest, "runtime-reader-key-0123")).statusCode).toBe(200);
    expect((await dryRun(seedRequest, "tools-exec-key-0123456")).statusCode).toBe(200);
  });

  it("writes nothing: no stream or KV bucket of the server gains a message", async () => {
    // Every stream's last sequence, KV buckets included (each is a stream): a write anywhere moves one.
    const before = await streamWatermarks(gw.nc);
    expect(Object.keys(before)).toContain(`KV_${CONFIG_BUCKET}`);
    expect((await dryRun(seedRequest)).statusCode).toBe(200);
    expect((await dryRun({ ...seedRequest, mock_receipts: [{ receipt_id: "big", kind: "completed", result: bigResult() }] })).statusCode).toBe(200);
    expect(await streamWatermarks(gw.nc)).toEqual(before);
  });
  it("shows each step of an async task: the submission whole as the call's answer, progress unseen, the completed as its own task result cut to the budget", async () => {
    const res = await dryRun({
      ...seedRequest,
      tool_name: "tasks.small",
      mock_receipts: [
        { receipt_id: "s1", kind: "submission", task_ref: "report-42", status: "report queued, about ten minutes" },
        { receipt_id: "p1", kind: "progress" },
        { receipt_id: "c1", kind: "completed", result: bigResult() },
      ],
    });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.steps.map((s: { receipt_id: string; history_entry: string }) => [s.receipt_id, s.history_entry])).toEqual([
      ["s1", "tool_result"],
      ["p1", "none"],
      ["c1", "task_result"],
    ]);
    expect(body.steps[0].context_preview).toMatchObject({ truncated: false, result: { task_ref: "report-42", status: "report queued, about ten minutes" } });
    expect(body.steps[1].context_preview).toBeNull();
    expect(body.steps[2].context_preview).toEqual(body.context_preview);
    expect(body.context_preview).toMatchObject({ truncated: true, max_result_context_bytes: 1024 });
    // Without a submission the completed is the call's own answer.
    const sync = (await dryRun(seedRequest)).json();
    expect(sync.steps).toEqual([{ receipt_id: "dry-run-page-001", kind: "completed", history_entry: "tool_result", context_preview: sync.context_preview }]);
  });

  it("refuses an oversized submission with submission_too_large, and one without its task reference", async () => {
    const submission = { receipt_id: "s1", kind: "submission", task_ref: "report-42", status: "é".repeat(600) };
    const res = await dryRun({ ...seedRequest, mock_receipts: [submission] });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatchObject({ code: "submission_too_large", details: [{ path: "mock_receipts[0].status", code: "too_big" }] });
    const missing = await dryRun({ ...seedRequest, mock_receipts: [{ receipt_id: "s1", kind: "submission", status: "queued" }] });
    expect(missing.statusCode).toBe(400);
    expect(missing.json().error).toMatchObject({ code: "validation_failed", details: [{ path: "mock_receipts[0].task_ref" }] });
  });
});
