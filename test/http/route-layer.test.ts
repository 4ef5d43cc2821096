import { describe, expect, it } from "vitest";
import { z } from "zod";
import { Writable } from "node:stream";
import { pino } from "pino";
import { createHttpApp } from "../../src/http/server.js";
import { registerRoutes } from "../../src/http/register.js";
import { defineRoute, fastifyPath } from "../../src/http/route.js";
import { IdentityRegistry } from "../../src/http/identities.js";
import { until } from "../helpers/until.js";

const KEY = "route-layer-key-0123456789";

function app(level = "info") {
  const lines: string[] = [];
  const logger = pino({ level, redact: ["req.headers.authorization"] }, new Writable({ write: (chunk, _e, done) => (lines.push(String(chunk)), done()) }));
  const http = createHttpApp({ logger });
  const params = z.object({ run_id: z.string().regex(/^[a-z0-9-]+$/) });
  const verb = (name: string) =>
    defineRoute({
      id: name,
      method: "POST",
      path: `/v1/runs/{run_id}:${name}`,
      summary: name,
      permissions: ["runtime:write"],
      errors: [],
      params,
      response: z.object({ verb: z.string(), run_id: z.string() }),
      handler: async ({ params: p }) => ({ verb: name, run_id: p.run_id }),
    });
  const withBody = defineRoute({
    id: "rename",
    method: "POST",
    path: "/v1/runs/{run_id}:rename",
    summary: "rename",
    permissions: ["runtime:write"],
    errors: [],
    params,
    body: z.strictObject({ name: z.string() }),
    response: z.object({ name: z.string() }),
    handler: async ({ body }) => ({ name: body.name }),
  });
  const identities = new IdentityRegistry([{ name: "w", key: KEY, agents: "*", permissions: ["runtime:write"] }]);
  registerRoutes(http, [verb("cancel"), verb("complete"), withBody], identities);
  return { http, lines };
}

describe("route layer", () => {
  it("maps OpenAPI paths with custom verbs to fastify paths", () => {
    expect(fastifyPath("/v1/runs/{run_id}:cancel")).toBe("/v1/runs/:run_id(^[^:/]+)::cancel");
    expect(fastifyPath("/v1/toolsets/{toolset}/versions/{version}")).toBe("/v1/toolsets/:toolset/versions/:version");
  });

  it("routes /v1/runs/{id}:cancel and :complete to their own handlers", async () => {
    const { http } = app();
    const headers = { authorization: `Bearer ${KEY}` };
    expect((await http.inject({ method: "POST", url: "/v1/runs/run-1:cancel", headers })).json()).toEqual({ verb: "cancel", run_id: "run-1" });
    expect((await http.inject({ method: "POST", url: "/v1/runs/run-1:complete", headers })).json()).toEqual({ verb: "complete", run_id: "run-1" });
    const unknown = await http.inject({ method: "POST", url: "/v1/runs/run-1:explode", headers });
    expect([unknown.statusCode, unknown.json().error.code]).toEqual([404, "route_not_found"]);
  });

  it("takes an empty body with content-type application/json as no body: accepted where none is declared, 'required' where one is", async () => {
    const { http } = app();
    const headers = { authorization: `Bearer ${KEY}`, "content-type": "application/json" };
    const none = await http.inject({ method: "POST", url: "/v1/runs/run-1:cancel", headers, payload: "" });
    expect([none.statusCode, none.json()]).toEqual([200, { verb: "cancel", run_id: "run-1" }]);
    const needed = await http.inject({ method: "POST", url: "/v1/runs/run-1:rename", headers, payload: "" });
    expect([needed.statusCode, needed.json().error.code, needed.json().error.details]).toEqual([
      400,
      "validation_failed",
      [expect.objectContaining({ path: "", code: "required" })],
    ]);
    const broken = await http.inject({ method: "POST", url: "/v1/runs/run-1:cancel", headers, payload: "{" });
    expect([broken.statusCode, broken.json().error.code]).toEqual([400, "invalid_json"]);
  });

  it("never writes the bearer key to the log", async () => {
    const { http, lines } = app();
    await http.inject({ method: "POST", url: "/v1/runs/run-1:cancel", headers: { authorization: `Bearer ${KEY}` } });
    await http.inject({ method: "POST", url: "/v1/runs/run-1:cancel", headers: { authorization: "Bearer wrong-key-0123456789" } });
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.join("\n")).not.toContain(KEY);
    expect(lines.join("\n")).not.toContain("wrong-key");
  });

  it("logs one access line per request, with its method, path, status and time: at debug when it went well", async () => {
    const { http, lines } = app("debug");
    await http.inject({ method: "POST", url: "/v1/runs/run-1:cancel", headers: { authorization: `Bearer ${KEY}` } });
    const access = lines.map((l) => JSON.parse(l)).filter((l) => l.req || l.res);
    expect(access).toHaveLength(1);
    expect(access[0]).toMatchObject({ level: 20, msg: "request completed", req: { method: "POST", url: "/v1/runs/run-1:cancel" }, res: { statusCode: 200 } });
    expect(access[0].responseTime).toBeGreaterThanOrEqual(0);
  });

  it("at info, logs the access line of a refused request and not of one that went well", async () => {
    const { http, lines } = app("info");
    await http.inject({ method: "POST", url: "/v1/runs/run-1:cancel", headers: { authorization: `Bearer ${KEY}` } });
    await http.inject({ method: "POST", url: "/v1/runs/run-1:complete", headers: { authorization: "Bearer wrong-key-0123456789" } });
    const access = lines.map((l) => JSON.parse(l)).filter((l) => l.req || l.res);
    expect(access).toEqual([
      expect.objectContaining({ level: 30, msg: "request completed", req: { method: "POST", url: "/v1/runs/run-1:complete" }, res: { statusCode: 401 } }),
    ]);
  });

  it("aborts a handler's signal when its client leaves, whether the handler asked for it before or only after", async () => {
    const http = createHttpApp({ logger: pino({ level: "silent" }) });
    const started = new Set<string>();
    const sawAbort = new Set<string>();
    const clientGone: Record<string, () => void> = {};
    const route = (name: "early" | "late") => {
      const gone = new Promise<void>((resolve) => (clientGone[name] = resolve));
      return defineRoute({
        id: name,
        method: "GET",
        path: `/v1/${name}`,
        summary: name,
        permissions: ["runtime:read"],
        errors: [],
        response: z.object({}),
        handler: async (req) => {
          if (name === "early") void req.signal; // asked before the client leaves
          started.add(name);
          await gone;
          await until(`${name}: its signal aborted`, () => req.signal.aborted || undefined, 5_000);
          sawAbort.add(name);
          return {};
        },
      });
    };
    registerRoutes(http, [route("early"), route("late")], new IdentityRegistry([{ name: "r", key: KEY, agents: "*", permissions: ["runtime:read"] }]));
    const base = await http.listen({ host: "127.0.0.1", port: 0 });
    let closedSockets = 0;
    http.server.on("connection", (socket) => socket.once("close", () => closedSockets++));
    try {
      for (const name of ["early", "late"] as const) {
        const client = new AbortController();
        const answered = fetch(`${base}/v1/${name}`, { headers: { authorization: `Bearer ${KEY}` }, signal: client.signal }).catch((err: Error) => err.name);
        await until(`${name} started`, () => started.has(name) || undefined);
        client.abort();
        expect(await answered).toBe("AbortError");
        // Every listener of the socket's close has run once this probe sees it: "late" asks only after the server knew.
        await until(`the server saw the ${name} client leave`, () => closedSockets > 0 || undefined);
        closedSockets = 0;
        clientGone[name]!();
        await until(`${name} handler saw its signal abort`, () => sawAbort.has(name) || undefined, 6_000);
      }
    } finally {
      await http.close();
    }
  });
});
