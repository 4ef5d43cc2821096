import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { ConfigStore } from "../../src/config/config-store.js";
import { BindingSchema, PublishToolsetVersionSchema } from "../../src/config/schemas.js";
import { ToolgateError } from "../../src/errors/toolgate-error.js";
import { applyStreams, loadDefinitions } from "../../src/streams/index.js";
import { startTestNats, type TestNats } from "../helpers/nats.js";

const tasksRead = {
  name: "tasks.read",
  description: "Read tasks page by page",
  binding_id: "binding_example",
  input_schema: { type: "object", properties: { cursor: { type: "string" } } },
  output_schema: { type: "object" },
};

describe("ConfigStore", () => {
  let nats: TestNats;
  let nc: NatsConnection;
  let store: ConfigStore;

  beforeAll(async () => {
    nats = await startTestNats();
    nc = await connect({ servers: nats.url });
    await applyStreams(await jetstreamManager(nc), loadDefinitions(), { replicas: 1 });
    store = await ConfigStore.open(nc);
  });
  afterAll(async () => {
    await nc?.close();
    await nats?.stop();
  });

  it("stores a binding once and refuses a second write with 409 already_published", async () => {
    const binding = await store.putBinding({ binding_id: "binding_example", executor_scope: "tasks-product", tool_kind: "read" });
    expect(binding.retry_reads_safe).toBe(false);
    await expect(store.putBinding({ binding_id: "binding_example", executor_scope: "other", tool_kind: "write" })).rejects.toMatchObject({
      code: "already_published",
    });
    expect(await store.getBinding("binding_example")).toEqual(binding);
    expect((await store.listBindings()).map((b) => b.binding_id)).toEqual(["binding_example"]);
  });

  it("publishes toolset versions immutably, with the 16 KiB default budget", async () => {
    const input = PublishToolsetVersionSchema.parse({ version: "v1", tools: [tasksRead] });
    const published = await store.publishToolsetVersion("tasks", input);
    expect(published.tools[0]?.max_result_context_bytes).toBe(16384);
    await expect(store.publishToolsetVersion("tasks", input)).rejects.toMatchObject({ code: "already_published" });
    expect(await store.getToolsetVersion("tasks", "v1")).toEqual(published);
    expect(await store.getToolsetVersion("tasks", "v2")).toBeNull();
  });

  it("refuses a toolset whose binding is not registered", async () => {
    const input = PublishToolsetVersionSchema.parse({ version: "v9", tools: [{ ...tasksRead, binding_id: "nope" }] });
    const err = await store.publishToolsetVersion("tasks", input).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ToolgateError);
    expect((err as ToolgateError).details).toEqual([expect.objectContaining({ path: "tools[0].binding_id", code: "unknown_binding" })]);
  });

  it("numbers agent versions <agent>.<n> and resolves a session's tool", async () => {
    const v1 = await store.publishAgentVersion("support-bot", { toolset: "tasks", toolset_version: "v1", max_context_tokens: 128000 });
    const v2 = await store.publishAgentVersion("support-bot", { toolset: "tasks", toolset_version: "v1", max_context_tokens: 64000 });
    expect([v1.agent_version, v2.agent_version]).toEqual(["support-bot.1", "support-bot.2"]);
    expect((await store.listAgentVersions("support-bot")).map((v) => v.agent_version)).toEqual(["support-bot.1", "support-bot.2"]);
    await expect(store.publishAgentVersion("support-bot", { toolset: "tasks", toolset_version: "v7", max_context_tokens: 1000 })).rejects.toMatchObject({
      code: "validation_failed",
    });

    const session = await store.createSession({ agent_version: "support-bot.2", subject: "user-42" });
    expect(session.agent).toBe("support-bot");
    const resolved = await store.resolveTool(session.session_id, "tasks.read");
    expect(resolved.binding.executor_scope).toBe("tasks-product");
    expect(resolved.agentVersion.max_context_tokens).toBe(64000);
    await expect(store.resolveTool(session.session_id, "tasks.write")).rejects.toMatchObject({ code: "tool_not_found" });
    await expect(store.resolveTool("missing", "tasks.read")).rejects.toMatchObject({ code: "session_not_found" });
  });

  it("reads values back from NATS after a fresh open (no cache) and validates them", async () => {
    const fresh = await ConfigStore.open(nc);
    expect((await fresh.getToolsetVersion("tasks", "v1"))?.tools[0]?.name).toBe("tasks.read");
    await fresh.kv.create("bindings.corrupt", JSON.stringify({ binding_id: "corrupt" }));
    await expect(fresh.getBinding("corrupt")).rejects.toThrow();
  });

  it("rejects ids that are not safe NATS key tokens", () => {
    const bad = BindingSchema.safeParse({ binding_id: "a.b", executor_scope: "x*", tool_kind: "read" });
    expect(bad.success).toBe(false);
    expect(bad.error?.issues.map((i) => i.path.join("."))).toEqual(["binding_id", "executor_scope"]);
  });
});
