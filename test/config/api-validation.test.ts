import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestNats, type TestNats } from "../helpers/nats.js";
import { ADMIN_KEY, bearer, bindingExample, startTestGateway, tasksRead } from "../helpers/gateway.js";
import type { Gateway } from "../../src/gateway/gateway.js";

describe("configuration API validation and immutability", () => {
  let nats: TestNats;
  let gw: Gateway;
  const post = (url: string, payload: unknown) => gw.app.inject({ method: "POST", url, headers: bearer(ADMIN_KEY), payload: payload as object });
  const get = (url: string) => gw.app.inject({ method: "GET", url, headers: bearer(ADMIN_KEY) });
  const publish = (tools: unknown[], extra: Record<string, unknown> = {}) => post("/v1/toolsets/tasks/versions", { version: "bad", tools, ...extra });
  const details = (res: { json(): unknown }) =>
    (res.json() as { error: { details: { path: string; code: string }[] } }).error.details.map((d) => [d.path, d.code]);

  beforeAll(async () => {
    nats = await startTestNats();
    gw = await startTestGateway(nats.url);
    expect((await post("/v1/bindings", bindingExample)).statusCode).toBe(201);
  });
  afterAll(async () => {
    await gw?.close();
    await nats?.stop();
  });

  it("publishes the seed's tool definition and reads it back", async () => {
    const res = await post("/v1/toolsets/tasks/versions", { version: "v1", tools: [tasksRead] });
    expect(res.statusCode).toBe(201);
    expect(res.json()).toMatchObject({ toolset: "tasks", version: "v1", tools: [tasksRead] });
    expect((await get("/v1/toolsets/tasks/versions/v1")).json()).toEqual(res.json());
    expect((await get("/v1/toolsets/tasks/versions")).json().versions).toHaveLength(1);
  });

  it("defaults max_result_context_bytes to 16384", async () => {
    const { max_result_context_bytes: _, ...withoutBudget } = tasksRead;
    const res = await post("/v1/toolsets/tasks/versions", { version: "v-default", tools: [withoutBudget] });
    expect(res.statusCode).toBe(201);
    expect(res.json().tools[0].max_result_context_bytes).toBe(16384);
  });

  it.each([
    [1023, "too_small"],
    [32769, "too_big"],
    [1.5, "invalid_type"],
    ["16384", "invalid_type"],
  ])("rejects max_result_context_bytes %s with %s and the allowed range", async (value, code) => {
    const res = await publish([{ ...tasksRead, max_result_context_bytes: value }]);
    expect(res.statusCode).toBe(400);
    const detail = res.json().error.details[0];
    expect(detail).toMatchObject({ path: "tools[0].max_result_context_bytes", code, allowed: expect.stringContaining("1024..32768") });
    expect(detail.message).toContain("1024");
  });

  it.each(["max_result_tokens", "max_result_bytes"])("rejects the removed field %s, naming max_result_context_bytes", async (field) => {
    const res = await publish([{ ...tasksRead, [field]: 4000 }]);
    expect(res.statusCode).toBe(400);
    const [detail] = res.json().error.details;
    expect(detail).toMatchObject({ path: `tools[0].${field}`, code: "removed_field", allowed: "max_result_context_bytes" });
    expect(detail.message).toContain("max_result_context_bytes");
  });

  it("reports every problem of a request together, each with its path", async () => {
    const res = await publish(
      [
        { ...tasksRead, binding_id: "not_registered", input_schema: { type: "objekt" }, max_result_context_bytes: 99999 },
        { ...tasksRead, output_schema: { properties: 5 } },
        { ...tasksRead, name: "bad name!" },
      ],
      { color: "blue" },
    );
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe("validation_failed");
    expect(details(res)).toEqual(
      expect.arrayContaining([
        ["tools[0].max_result_context_bytes", "too_big"],
        ["tools[2].name", "invalid_format"],
        ["color", "unknown_field"],
        ["tools[0].binding_id", "unknown_binding"],
        ["tools[0].input_schema.type", "invalid_json_schema"],
        ["tools[1].output_schema.properties", "invalid_json_schema"],
        ["tools[1].name", "duplicate_name"],
      ]),
    );
  });

  it("rejects unknown fields in a tool, a missing field, an empty tool list and a bad toolset id", async () => {
    const { description: _, ...noDescription } = tasksRead;
    expect(details(await publish([{ ...tasksRead, colour: 1 }]))).toEqual([["tools[0].colour", "unknown_field"]]);
    expect(details(await publish([noDescription]))).toEqual([["tools[0].description", "required"]]);
    expect(details(await publish([]))).toEqual([["tools", "too_small"]]);
    const badId = await post("/v1/toolsets/a.b/versions", { version: "v1", tools: [tasksRead] });
    expect(details(badId)).toEqual([["params.toolset", "invalid_format"]]);
  });

  it("refuses to republish a version: 409 already_published, the first stays", async () => {
    const res = await post("/v1/toolsets/tasks/versions", { version: "v1", tools: [{ ...tasksRead, max_result_context_bytes: 2048 }] });
    expect(res.statusCode).toBe(409);
    expect(res.json().error.code).toBe("already_published");
    expect((await get("/v1/toolsets/tasks/versions/v1")).json().tools[0].max_result_context_bytes).toBe(16384);
    expect((await post("/v1/bindings", bindingExample)).statusCode).toBe(409);
  });

  it("validates bindings", async () => {
    const res = await post("/v1/bindings", { binding_id: "b 1", executor_scope: "s", tool_kind: "delete", retry_reads_safe: "yes" });
    expect(details(res)).toEqual([
      ["binding_id", "invalid_format"],
      ["tool_kind", "invalid_value"],
      ["retry_reads_safe", "invalid_type"],
    ]);
    expect(res.json().error.details[1].allowed).toBe("read|write");
  });

  it("agent versions: fixed ids, existing toolset version required, immutable by construction", async () => {
    const first = await post("/v1/agents/bot/versions", { toolset: "tasks", toolset_version: "v1", max_context_tokens: 128000 });
    expect(first.statusCode).toBe(201);
    expect(first.json().agent_version).toBe("bot.1");
    const missing = await post("/v1/agents/bot/versions", { toolset: "tasks", toolset_version: "v404", max_context_tokens: 128000 });
    expect(details(missing)).toEqual([["toolset_version", "unknown_toolset_version"]]);
    expect(details(await post("/v1/agents/bot/versions", { toolset: "tasks", toolset_version: "v1", max_context_tokens: 0 }))).toEqual([
      ["max_context_tokens", "too_small"],
    ]);
    expect((await get("/v1/agent-versions/bot.1")).json()).toEqual(first.json());
    expect((await get("/v1/agents/bot/versions")).json().versions.map((v: { agent_version: string }) => v.agent_version)).toEqual(["bot.1"]);
    expect((await get("/v1/agent-versions/bot.9")).json().error.code).toBe("agent_version_not_found");
  });

  it("sessions pin a published agent version", async () => {
    const res = await post("/v1/sessions", { agent_version: "bot.1", subject: "user-42" });
    expect(res.statusCode).toBe(201);
    const session = res.json();
    expect(session).toMatchObject({ agent: "bot", agent_version: "bot.1", subject: "user-42" });
    expect((await get(`/v1/sessions/${session.session_id}`)).json()).toEqual(session);
    expect((await get("/v1/sessions?agent=bot")).json().sessions).toEqual([session]);
    expect(details(await post("/v1/sessions", { agent_version: "bot.7", subject: "u" }))).toEqual([["agent_version", "unknown_agent_version"]]);
    expect(details(await post("/v1/sessions", { agent_version: "bot", subject: "" }))).toEqual([
      ["agent_version", "invalid_format"],
      ["subject", "too_small"],
    ]);
    expect((await get("/v1/sessions/nope")).statusCode).toBe(404);
  });

  it("answers bad JSON with 400 invalid_json, other media types with 415, unknown routes with 404", async () => {
    const bad = await gw.app.inject({
      method: "POST",
      url: "/v1/bindings",
      headers: { ...bearer(ADMIN_KEY), "content-type": "application/json" },
      payload: "{nope",
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.code).toBe("invalid_json");
    const text = await gw.app.inject({ method: "POST", url: "/v1/bindings", headers: { ...bearer(ADMIN_KEY), "content-type": "text/plain" }, payload: "x" });
    expect([text.statusCode, text.json().error.code]).toEqual([415, "unsupported_media_type"]);
    const none = await get("/v1/nothing");
    expect([none.statusCode, none.json().error.code]).toEqual([404, "route_not_found"]);
  });
});
