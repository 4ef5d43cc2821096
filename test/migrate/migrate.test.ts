import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { ConfigStore } from "../../src/config/config-store.js";
import { legacyObjectsFromExport, legacyObjectsFromStore, migrate } from "../../src/migrate/migrate.js";
import { applyStreams, loadDefinitions } from "../../src/streams/index.js";
import { startTestNats, type TestNats } from "../helpers/nats.js";
import { runCli } from "../helpers/serve.js";

const legacyTool = (name: string, legacy: Record<string, unknown>) => ({
  name,
  description: "legacy tool",
  binding_id: "legacy_binding",
  input_schema: { type: "object" },
  output_schema: { type: "object" },
  ...legacy,
});
const legacyExport = {
  bindings: [{ binding_id: "legacy_binding", executor_scope: "crm", tool_kind: "read" }],
  toolsets: [
    {
      toolset: "crm",
      version: "2023-1",
      published_at: "2023-05-01T00:00:00.000Z",
      tools: [
        legacyTool("crm.search", { max_result_tokens: 4000 }),
        legacyTool("crm.get", { max_result_bytes: 65536, max_result_tokens: 100 }),
        legacyTool("crm.list", { max_result_context_bytes: 2048 }),
      ],
    },
  ],
  agents: [
    {
      agent: "crm-bot",
      agent_version: "crm-bot.1",
      toolset: "crm",
      toolset_version: "2023-1",
      max_context_tokens: 32000,
      published_at: "2023-05-01T00:00:00.000Z",
    },
  ],
  execution_history: [{ run_id: "r-1", receipts: [] }],
};

describe("toolgate migrate", () => {
  let nats: TestNats;
  let nc: NatsConnection;
  let store: ConfigStore;
  let dir: string;

  beforeAll(async () => {
    nats = await startTestNats();
    nc = await connect({ servers: nats.url });
    const jsm = await jetstreamManager(nc);
    await applyStreams(jsm, loadDefinitions(), { replicas: 1 });
    store = await ConfigStore.open(nc);
    dir = mkdtempSync(join(tmpdir(), "toolgate-migrate-"));
    // Committed execution history stands in as a stream the migration must not touch.
    await jsm.streams.add({ name: "T_HISTORY", subjects: ["t.history.>"] });
    await jetstream(nc).publish("t.history.r-1", JSON.stringify({ receipt_id: "r", max_result_tokens: 4000 }));
  });
  afterAll(async () => {
    await nc?.close();
    await nats?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("converts token settings to the 16 KiB default and reports each change", async () => {
    const { objects, ignored } = legacyObjectsFromExport(legacyExport, "export.json");
    expect(ignored).toEqual(["execution_history"]);
    const report = await migrate(store, objects);
    expect(report).toMatchObject({ created: 3, unchanged: 0, failed: 0 });
    expect(report.lines).toEqual(
      expect.arrayContaining([
        "export.json toolsets[0] -> toolsets.crm.2023-1: tools[0] crm.search: removed max_result_tokens=4000",
        "export.json toolsets[0] -> toolsets.crm.2023-1: tools[0] crm.search: set max_result_context_bytes=16384 (default)",
        "export.json toolsets[0] -> toolsets.crm.2023-1: tools[1] crm.get: removed max_result_bytes=65536",
      ]),
    );
    const tools = (await store.getToolsetVersion("crm", "2023-1"))!.tools;
    expect(tools.map((t) => t.max_result_context_bytes)).toEqual([16384, 16384, 2048]);
    expect(tools.some((t) => "max_result_tokens" in t || "max_result_bytes" in t)).toBe(false);
    expect((await store.getAgentVersion("crm-bot.1"))?.toolset_version).toBe("2023-1");
  });

  it("is idempotent: the second run reports no changes", async () => {
    const report = await migrate(store, legacyObjectsFromExport(legacyExport, "export.json").objects);
    expect(report).toMatchObject({ created: 0, unchanged: 3, failed: 0 });
  });

  it("keeps execution history untouched", async () => {
    const jsm = await jetstreamManager(nc);
    const info = await jsm.streams.info("T_HISTORY");
    expect(info.state.messages).toBe(1);
    const msg = await jsm.streams.getMessage("T_HISTORY", { seq: 1 });
    expect(msg?.json()).toEqual({ receipt_id: "r", max_result_tokens: 4000 });
  });

  it("migrates legacy.* objects stored in NATS, leaving them in place, and reports failures", async () => {
    await store.kv.create(
      "legacy.toolsets.crm.2022-9",
      JSON.stringify({
        toolset: "crm",
        version: "2022-9",
        published_at: "2022-09-01T00:00:00.000Z",
        tools: [legacyTool("crm.search", { max_result_tokens: 800 })],
      }),
    );
    await store.kv.create(
      "legacy.toolsets.crm.broken",
      JSON.stringify({ toolset: "crm", version: "broken", published_at: "2022-09-01T00:00:00.000Z", tools: [legacyTool("crm.x", { binding_id: "gone" })] }),
    );
    const first = await migrate(store, await legacyObjectsFromStore(store));
    expect(first).toMatchObject({ created: 1, failed: 1 });
    expect(first.lines.join("\n")).toContain("legacy.toolsets.crm.broken: not migrated: tools[0].binding_id binding 'gone' is not registered");
    expect((await store.getToolsetVersion("crm", "2022-9"))?.tools[0]?.max_result_context_bytes).toBe(16384);
    expect((await store.kv.get("legacy.toolsets.crm.2022-9"))?.json()).toMatchObject({ tools: [{ max_result_tokens: 800 }] });
    const second = await migrate(store, await legacyObjectsFromStore(store));
    expect(second).toMatchObject({ created: 0, unchanged: 1, failed: 1 });
  });

  it("runs as 'toolgate migrate --from FILE' twice, the second time without changes", async () => {
    const file = join(dir, "export.json");
    const other = { ...legacyExport, bindings: [], agents: [], toolsets: [{ ...legacyExport.toolsets[0], version: "2024-2" }] };
    writeFileSync(file, JSON.stringify(other));
    const cli = (args: string[]) => runCli(["migrate", ...args, "--server", nats.url]);
    const dry = await cli(["--from", file, "--dry-run"]);
    expect(dry.stdout).toContain("would create");
    const first = await cli(["--from", file]);
    expect(first.code).toBe(0);
    expect(first.stderr).toContain("migrate: 1 legacy object(s) to check\nmigrate: 1/1 checked\n");
    expect(first.stdout).toContain("set max_result_context_bytes=16384 (default)");
    expect(first.stdout).toContain("migrate: 1 created, 0 unchanged, 0 failed");
    const second = await cli(["--from", file]);
    expect(second.stdout).toContain("migrate: 0 created, 1 unchanged, 0 failed (no changes)");
  });
});
