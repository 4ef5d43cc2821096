import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Ajv2020 } from "ajv/dist/2020.js";
import { nkeys } from "@nats-io/transport-node";
import { PERMISSIONS, type IdentityConfig } from "../../src/http/identities.js";
import type { RouteDef } from "../../src/http/route.js";
import { configRoutes } from "../../src/config/routes.js";
import { dryRunRoutes } from "../../src/dryrun/route.js";
import type { ExecutorStore } from "../../src/executors/executor-store.js";
import { executorRoutes } from "../../src/executors/routes.js";
import { systemRoutes } from "../../src/http/system-routes.js";
import type { Execution } from "../../src/execution/execution.js";
import { executionRoutes } from "../../src/execution/http/routes.js";
import { operationRoutes } from "../../src/execution/http/operation-routes.js";
import { ProtocolExecutor } from "../helpers/protocol-executor.js";
import type { ContextWindows } from "../../src/context/context-windows.js";
import { contextRoutes } from "../../src/context/routes.js";
import type { ConfigStore } from "../../src/config/config-store.js";
import type { Gateway } from "../../src/gateway/gateway.js";
import { startTestNats, type TestNats } from "../helpers/nats.js";
import { admin, ADMIN_KEY, bearer, bindingExample, startTestGateway, tasksRead } from "../helpers/gateway.js";
import { parseEventStream } from "../../src/client/event-source.js";
import { HTTP_ERRORS, type HttpErrorCode } from "../../src/errors/catalogue.js";

/**
 * Table-driven over the route declarations: every route needs a valid sample request here, so a new
 * route fails this suite until it is covered by the 401/403 matrix and the OpenAPI checks.
 */
interface Sample {
  params?: Record<string, string>;
  query?: Record<string, string>;
  body?: unknown;
}
let sessionId = "";
/** Runtime ids made in beforeAll: a run with a tool call, and one run each to complete and to cancel. */
const rt = { run: "", assignment: "", toComplete: "", toCancel: "", running: "", completedWrite: "", unknownOutcome: "" };
const samples: Record<string, () => Sample> = {
  healthz: () => ({}),
  readyz: () => ({}),
  openapi: () => ({}),
  createBinding: () => ({ body: { binding_id: "b_matrix", executor_scope: "scope", tool_kind: "write" } }),
  listBindings: () => ({}),
  getBinding: () => ({ params: { binding_id: "binding_example" } }),
  publishToolsetVersion: () => ({ params: { toolset: "tasks" }, body: { version: "v-matrix", tools: [tasksRead] } }),
  listToolsetVersions: () => ({ params: { toolset: "tasks" } }),
  getToolsetVersion: () => ({ params: { toolset: "tasks", version: "v1" } }),
  publishAgentVersion: () => ({ params: { agent: "bot" }, body: { toolset: "tasks", toolset_version: "v1", max_context_tokens: 1000 } }),
  listAgentVersions: () => ({ params: { agent: "bot" } }),
  getAgentVersion: () => ({ params: { agent_version: "bot.1" } }),
  createSession: () => ({ body: { agent_version: "bot.1", subject: "user-1" } }),
  listSessions: () => ({ query: { agent: "bot" } }),
  getSession: () => ({ params: { session_id: sessionId } }),
  registerExecutor: () => ({ body: { executor_id: "ex_matrix", scope: "scope", nkeys: [nkeys.createUser().getPublicKey()] } }),
  listExecutors: () => ({}),
  getExecutor: () => ({ params: { executor_id: "ex_matrix" } }),
  rotateExecutorKeys: () => ({ params: { executor_id: "ex_matrix" }, body: { nkeys: [nkeys.createUser().getPublicKey()] } }),
  setExecutorBindings: () => ({ params: { executor_id: "ex_matrix" }, body: { bindings: [] } }),
  removeExecutor: () => ({ params: { executor_id: "ex_matrix" } }),
  createRun: () => ({ params: { session_id: sessionId } }),
  getRun: () => ({ params: { run_id: rt.run } }),
  createToolCall: () => ({ params: { run_id: rt.run }, body: { tool_name: "tasks.read", arguments: { cursor: "c" } } }),
  getAssignment: () => ({ params: { assignment_id: rt.assignment } }),
  getRunHistory: () => ({ params: { run_id: rt.run } }),
  getRunTasks: () => ({ params: { run_id: rt.run } }),
  completeRun: () => ({ params: { run_id: rt.toComplete } }),
  cancelRun: () => ({ params: { run_id: rt.toCancel } }),
  getRunEvents: () => ({ params: { run_id: rt.run }, query: { after: "0" } }),
  cancelTask: () => ({ params: { assignment_id: rt.running }, body: { reason: "the user changed their mind" } }),
  compensate: () => ({ params: { assignment_id: rt.completedWrite } }),
  reconcileAssignment: () => ({ params: { assignment_id: rt.unknownOutcome }, body: { outcome: "completed", result: { found: true } } }),
  detachExecutor: () => ({ params: { executor_id: "exec-gone" }, body: { scope: "tasks-product" } }),
  reportUsage: () => ({ params: { run_id: rt.run }, body: { input_tokens: 120, prompt_text_bytes: 480 } }),
  getRunContext: () => ({ params: { run_id: rt.run } }),
  dryRunTool: () => ({
    body: {
      agent_version: "bot.1",
      tool_name: "tasks.read",
      arguments: { cursor: "c" },
      mock_receipts: [{ receipt_id: "r1", kind: "completed", result: { ok: true } }],
    },
  }),
};

function url(route: RouteDef, sample: Sample): string {
  const path = route.path.replace(/\{(\w+)\}/g, (_, name: string) => encodeURIComponent(sample.params?.[name] ?? ""));
  const query = new URLSearchParams(sample.query ?? {}).toString();
  return query ? `${path}?${query}` : path;
}

const declared: RouteDef[] = [
  ...systemRoutes({ readiness: async () => ({ ready: true, checks: {} }), openapi: () => ({}) }),
  ...configRoutes({} as ConfigStore),
  ...executorRoutes({} as ExecutorStore, {} as Execution["detach"]),
  ...dryRunRoutes({} as ConfigStore),
  ...executionRoutes({} as Execution, {} as ConfigStore),
  ...operationRoutes({} as Execution),
  ...contextRoutes({} as ContextWindows, async () => undefined),
];
/** A time field of an HTTP answer: named `*_at`, or `at`. */
const isTimeField = (name: string) => name === "at" || name.endsWith("_at");
const RFC3339_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

/** Every time field in `value` (at any depth), as `path: value`. */
function timeFields(value: unknown, path = "$"): Array<[string, unknown]> {
  if (Array.isArray(value)) return value.flatMap((v, i) => timeFields(v, `${path}[${i}]`));
  if (typeof value !== "object" || value === null) return [];
  return Object.entries(value).flatMap(([k, v]) => [
    ...(isTimeField(k) && v !== null ? [[`${path}.${k}`, v] as [string, unknown]] : []),
    ...timeFields(v, `${path}.${k}`),
  ]);
}

/** Every property schema named as a time field in a JSON Schema (at any depth), as `path: schema`. */
function timeSchemas(schema: unknown, path = "#"): Array<[string, unknown]> {
  if (Array.isArray(schema)) return schema.flatMap((s, i) => timeSchemas(s, `${path}/${i}`));
  if (typeof schema !== "object" || schema === null) return [];
  const properties = (schema as { properties?: Record<string, unknown> }).properties ?? {};
  const own = Object.entries(properties)
    .filter(([k]) => isTimeField(k))
    .map(([k, v]) => [`${path}/properties/${k}`, v] as [string, unknown]);
  return [...own, ...Object.entries(schema).flatMap(([k, v]) => timeSchemas(v, `${path}/${k}`))];
}

const lacking = (route: RouteDef): IdentityConfig => ({
  name: `lacks-${route.id}`,
  key: `lacks-key-${route.id}-0123456789`,
  agents: "*",
  permissions: PERMISSIONS.filter((p) => route.permissions === "public" || !route.permissions.includes(p)),
});
const otherAgent: IdentityConfig = { name: "other-agent", key: "other-agent-key-0123456789", agents: ["someone-else"], permissions: [...PERMISSIONS] };
const scoped: IdentityConfig = { name: "bot-only", key: "bot-only-key-0123456789", agents: ["bot"], permissions: [...PERMISSIONS] };

describe("route contract: auth matrix and OpenAPI", () => {
  let nats: TestNats;
  let gw: Gateway;
  let baseUrl: string;
  let executor: ProtocolExecutor;
  const send = async (
    route: RouteDef,
    headers: Record<string, string> = {},
  ): Promise<{ statusCode: number; body: string; headers: Record<string, unknown>; json(): any }> => {
    const sample = samples[route.id]!();
    if (route.stream !== "sse")
      return gw.app.inject({
        method: route.method,
        url: url(route, sample),
        headers,
        ...(sample.body !== undefined ? { payload: sample.body as object } : {}),
      });
    // An event stream never ends by itself: take its status and leave.
    const leave = new AbortController();
    const res = await fetch(baseUrl + url(route, sample), { headers, signal: leave.signal });
    const body = res.ok ? "" : await res.text();
    leave.abort();
    return { statusCode: res.status, body, headers: Object.fromEntries(res.headers), json: () => JSON.parse(body) };
  };

  beforeAll(async () => {
    nats = await startTestNats();
    gw = await startTestGateway(nats.url, [admin, otherAgent, scoped, ...declared.filter((r) => r.permissions !== "public").map(lacking)]);
    const h = bearer(ADMIN_KEY);
    await gw.app.inject({ method: "POST", url: "/v1/bindings", headers: h, payload: bindingExample });
    await gw.app.inject({ method: "POST", url: "/v1/toolsets/tasks/versions", headers: h, payload: { version: "v1", tools: [tasksRead] } });
    await gw.app.inject({
      method: "POST",
      url: "/v1/agents/bot/versions",
      headers: h,
      payload: { toolset: "tasks", toolset_version: "v1", max_context_tokens: 1000 },
    });
    sessionId = (await gw.app.inject({ method: "POST", url: "/v1/sessions", headers: h, payload: { agent_version: "bot.1", subject: "u" } })).json().session_id;
    const newRun = async () => (await gw.app.inject({ method: "POST", url: `/v1/sessions/${sessionId}/runs`, headers: h })).json().run_id as string;
    [rt.run, rt.toComplete, rt.toCancel] = [await newRun(), await newRun(), await newRun()];
    rt.assignment = (
      await gw.app.inject({ method: "POST", url: `/v1/runs/${rt.run}/tool-calls`, headers: h, payload: { tool_name: "tasks.read", arguments: {} } })
    ).json().assignment.assignment_id;
    baseUrl = await gw.listen();
    await seedOperationTargets(h);
  });

  /** A running read, a completed write and a write of unknown outcome, driven over the wire by a protocol executor. */
  async function seedOperationTargets(h: Record<string, string>): Promise<void> {
    await gw.app.inject({
      method: "POST",
      url: "/v1/bindings",
      headers: h,
      payload: { binding_id: "binding_write", executor_scope: "tasks-product", tool_kind: "write" },
    });
    const write = { ...tasksRead, name: "tasks.create", binding_id: "binding_write", description: "Create a task" };
    await gw.app.inject({ method: "POST", url: "/v1/toolsets/ops/versions", headers: h, payload: { version: "v1", tools: [tasksRead, write] } });
    const agentVersion = (
      await gw.app.inject({
        method: "POST",
        url: "/v1/agents/bot/versions",
        headers: h,
        payload: { toolset: "ops", toolset_version: "v1", max_context_tokens: 1000 },
      })
    ).json().agent_version;
    const session = (await gw.app.inject({ method: "POST", url: "/v1/sessions", headers: h, payload: { agent_version: agentVersion, subject: "u" } })).json()
      .session_id;
    const run = (await gw.app.inject({ method: "POST", url: `/v1/sessions/${session}/runs`, headers: h })).json().run_id;
    executor = new ProtocolExecutor(gw.nc, "tasks-product", "exec-contract", ["binding_example", "binding_write"]);
    await executor.heartbeat();
    const drive = async (tool: string, final?: Parameters<ProtocolExecutor["receipt"]>[1]): Promise<string> => {
      const id = (await gw.app.inject({ method: "POST", url: `/v1/runs/${run}/tool-calls`, headers: h, payload: { tool_name: tool, arguments: {} } })).json()
        .assignment.assignment_id;
      const candidate = await executor.pullFor(id);
      const reply = await executor.claim(id, candidate.generation);
      if (reply.status !== "granted") throw new Error(`claim refused: ${reply.code}`);
      await executor.send(executor.accepted(reply.grant));
      if (final) await executor.send(executor.receipt(reply.grant, final));
      return id;
    };
    rt.running = await drive("tasks.read");
    rt.completedWrite = await drive("tasks.create", { kind: "completed", result: { task_id: "t-1" } });
    rt.unknownOutcome = await drive("tasks.create", { kind: "reconciliation_required", error: { code: "handler_error", message: "lost" } });
  }

  afterAll(async () => {
    executor?.close();
    await gw?.close();
    await nats?.stop();
  });

  it("covers every served route with a sample", () => {
    expect(gw.routes.map((r) => r.id).sort()).toEqual(Object.keys(samples).sort());
    expect(declared.map((r) => r.id).sort()).toEqual(Object.keys(samples).sort());
  });

  it("public routes answer without a key", async () => {
    for (const route of gw.routes.filter((r) => r.permissions === "public")) expect((await send(route)).statusCode, route.id).toBe(200);
  });

  it("401 unauthenticated without a key or with an unknown key, on every other route", async () => {
    for (const route of gw.routes.filter((r) => r.permissions !== "public")) {
      for (const headers of [{}, bearer("not-a-configured-key-000"), { authorization: "Basic abc" }]) {
        const res = await send(route, headers);
        expect([res.statusCode, res.json().error.code], route.id).toEqual([401, "unauthenticated"]);
        expect(res.headers["www-authenticate"], route.id).toBe('Bearer realm="toolgate"');
      }
    }
  });

  it("403 permission_denied for an identity holding none of the route's permissions", async () => {
    for (const route of gw.routes.filter((r) => r.permissions !== "public")) {
      const res = await send(route, bearer(lacking(route).key!));
      expect([res.statusCode, res.json().error.code], route.id).toEqual([403, "permission_denied"]);
      expect(res.json().error.details, route.id).toEqual([
        expect.objectContaining({ path: "authorization", code: "permission_denied", allowed: (route.permissions as string[]).join("|") }),
      ]);
    }
  });

  it("403 agent_out_of_scope on agent-scoped routes for an identity scoped to another agent", async () => {
    for (const route of gw.routes.filter((r) => r.agentScope)) {
      const res = await send(route, bearer(otherAgent.key!));
      expect([res.statusCode, res.json().error.code], route.id).toEqual([403, "agent_out_of_scope"]);
    }
  });

  it("an identity in scope with the permission passes auth on every route; a route that takes no body accepts an empty JSON one; every time answered is RFC 3339", async () => {
    const timed = new Set<string>();
    for (const route of gw.routes.filter((r) => r.permissions !== "public")) {
      // What `curl -H 'content-type: application/json' -X POST` sends: the header, no body.
      const emptyJson =
        route.method !== "GET" && samples[route.id]!().body === undefined ? { "content-type": "application/json" } : ({} as Record<string, string>);
      const res = await send(route, { ...bearer(scoped.key!), ...emptyJson });
      expect(res.statusCode, `${route.id}: ${res.body}`).toBeLessThan(300);
      if (route.stream === "sse" || res.body === "") continue;
      for (const [path, value] of timeFields(res.json())) {
        expect(value, `${route.id} ${path}`).toMatch(RFC3339_UTC);
        timed.add(route.id);
      }
    }
    // Runs and assignments kept epoch milliseconds before; sessions and executors were strings already.
    expect([...timed]).toEqual(
      expect.arrayContaining(["createRun", "getRun", "createToolCall", "getAssignment", "getRunHistory", "cancelTask", "getSession", "getExecutor"]),
    );
  });

  it("the run's event stream gives its times as RFC 3339", async () => {
    const leave = new AbortController();
    const res = await fetch(`${baseUrl}/v1/runs/${rt.run}/events?after=0`, { headers: bearer(ADMIN_KEY), signal: leave.signal });
    for await (const raw of parseEventStream(res.body!)) {
      const event = JSON.parse(raw.data);
      expect(event.type).toBe("run"); // the run's creation
      expect(event.at).toMatch(RFC3339_UTC);
      break;
    }
    leave.abort();
  });

  it("the OpenAPI document lists, per route and status, the catalogue codes the route can answer, and real refusals are among them", async () => {
    const doc = (await gw.app.inject({ method: "GET", url: "/v1/openapi.json" })).json();
    const codesOf = (route: string, method: string): Record<string, HttpErrorCode[]> => {
      const responses = doc.paths[route][method].responses as Record<string, { "x-error-codes"?: HttpErrorCode[] }>;
      return Object.fromEntries(Object.entries(responses).flatMap(([status, r]) => (r["x-error-codes"] ? [[status, r["x-error-codes"]]] : [])));
    };
    for (const route of gw.routes)
      for (const [status, codes] of Object.entries(codesOf(route.path, route.method.toLowerCase())))
        for (const code of codes) expect([route.id, code, HTTP_ERRORS[code]?.status]).toEqual([route.id, code, Number(status)]);

    expect(codesOf("/healthz", "get")).toEqual({ "500": ["internal"] });
    const toolCall = codesOf("/v1/runs/{run_id}/tool-calls", "post");
    expect(toolCall["401"]).toEqual(["unauthenticated"]);
    expect(toolCall["403"]).toEqual(["permission_denied", "agent_out_of_scope"]);
    expect(toolCall["404"]).toEqual(expect.arrayContaining(["run_not_found", "tool_not_found"]));
    expect(toolCall["409"]).toEqual(["run_terminated", "idempotency_conflict"]);
    expect(toolCall["400"]).toEqual(["validation_failed", "invalid_json", "invalid_utf8", "json_too_deep"]);
    expect(toolCall["413"]).toEqual(["payload_too_large"]);
    expect(toolCall["503"]).toBeUndefined();
    expect(codesOf("/v1/assignments/{assignment_id}:cancel-task", "post")["409"]).toEqual(["task_not_running"]);
    expect(codesOf("/v1/executors/{executor_id}:detach", "post")["403"]).toEqual(["permission_denied"]); // not agent-scoped
    expect(codesOf("/v1/runs/{run_id}", "get")["400"]).toEqual(["validation_failed"]); // a GET carries no body

    // What the gateway really answers is what the document says it may.
    const h = bearer(ADMIN_KEY);
    const refusals: Array<[string, string, { status: number; code: string }]> = [
      ["/v1/runs/{run_id}", "get", (await gw.app.inject({ method: "GET", url: "/v1/runs/run_nope", headers: h })).json().error],
      [
        "/v1/runs/{run_id}/tool-calls",
        "post",
        (await gw.app.inject({ method: "POST", url: `/v1/runs/${rt.run}/tool-calls`, headers: h, payload: { tool_name: "no.such" } })).json().error,
      ],
      ["/v1/runs/{run_id}:cancel", "post", (await gw.app.inject({ method: "POST", url: `/v1/runs/${rt.toComplete}:cancel`, headers: h })).json().error],
      [
        "/v1/assignments/{assignment_id}:compensate",
        "post",
        (await gw.app.inject({ method: "POST", url: `/v1/assignments/${rt.assignment}:compensate`, headers: h })).json().error,
      ],
    ];
    expect(refusals.map(([, , e]) => e.code)).toEqual(["run_not_found", "tool_not_found", "run_terminated", "read_not_compensable"]);
    for (const [path, method, error] of refusals) expect(Object.values(codesOf(path, method)).flat(), `${method} ${path}`).toContain(error.code);
  });

  it("the OpenAPI response schemas declare every time field as an RFC 3339 string", async () => {
    const doc = (await gw.app.inject({ method: "GET", url: "/v1/openapi.json" })).json();
    const fields = Object.values(doc.paths as Record<string, Record<string, { responses: unknown }>>).flatMap((ops) =>
      Object.values(ops).flatMap((op) => timeSchemas(op.responses)),
    );
    expect(fields.length).toBeGreaterThan(20);
    for (const [path, schema] of fields) {
      const variants = (schema as { anyOf?: unknown[] }).anyOf ?? [schema];
      expect(
        variants.filter((v) => (v as { type?: string }).type !== "null"),
        path,
      ).toEqual([expect.objectContaining({ type: "string", format: "date-time" })]);
    }
  });

  it("the OpenAPI document lists every route with its permissions", async () => {
    const doc = (await gw.app.inject({ method: "GET", url: "/v1/openapi.json" })).json();
    expect(doc.openapi).toBe("3.1.0");
    for (const route of gw.routes) {
      const op = doc.paths[route.path]?.[route.method.toLowerCase()];
      expect(op?.operationId, route.id).toBe(route.id);
      expect(op["x-permissions"]).toEqual(route.permissions === "public" ? [] : route.permissions);
    }
    expect(Object.keys(doc.paths)).toContain("/v1/tools/dry-run");
  });

  it("the OpenAPI request schemas accept the real requests and reject invalid ones", async () => {
    const doc = (await gw.app.inject({ method: "GET", url: "/v1/openapi.json" })).json();
    const ajv = new Ajv2020({ strict: false });
    for (const route of gw.routes) {
      const op = doc.paths[route.path][route.method.toLowerCase()];
      const sample = samples[route.id]!();
      for (const param of op.parameters) {
        const value = (param.in === "path" ? sample.params : sample.query)?.[param.name];
        expect(ajv.validate(param.schema, value), `${route.id} ${param.name}`).toBe(true);
      }
      if (!route.body) continue;
      const schema = op.requestBody.content["application/json"].schema;
      expect(ajv.validate(schema, sample.body), `${route.id}: ${ajv.errorsText()}`).toBe(true);
      expect(ajv.validate(schema, { ...(sample.body as object), unexpected_field: 1 }), route.id).toBe(false);
    }
    const publish = doc.paths["/v1/toolsets/{toolset}/versions"].post.requestBody.content["application/json"].schema;
    expect(ajv.validate(publish, { version: "v2", tools: [{ ...tasksRead, max_result_context_bytes: 40000 }] })).toBe(false);
    expect(ajv.validate(publish, { version: "v2", tools: [{ ...tasksRead, max_result_tokens: 10 }] })).toBe(false);
  });
});
