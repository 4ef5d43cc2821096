import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstream, jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { applyStreams, ensureStreams, loadDefinitions, parseDefinitions, StreamsRefusedError, DefinitionsError } from "../../src/streams/index.js";
import { startTestNats, type TestNats } from "../helpers/nats.js";

const base = [
  { kind: "stream", name: "T_WORK", subjects: ["t.work.>"], retention: "workqueue", max_msgs: 100 },
  { kind: "consumer", stream: "T_WORK", durable_name: "scope-a", filter_subject: "t.work.a.>" },
  { kind: "kv", bucket: "t_state", history: 5 },
];
const withChange = (index: number, patch: Record<string, unknown>) => base.map((d, i) => (i === index ? { ...d, ...patch } : d));

describe("streams apply", () => {
  let nats: TestNats;
  let nc: NatsConnection;
  let jsm: JetStreamManager;

  beforeAll(async () => {
    nats = await startTestNats();
    nc = await connect({ servers: nats.url });
    jsm = await jetstreamManager(nc);
  });
  afterAll(async () => {
    await nc?.close();
    await nats?.stop();
  });

  it("creates every declared object on first apply", async () => {
    const result = await applyStreams(jsm, parseDefinitions(base), { replicas: 1 });
    expect(result.applied).toBe(true);
    expect(result.plan.map((e) => [e.label, e.action])).toEqual([
      ["stream T_WORK", "create"],
      ["kv t_state", "create"],
      ["consumer T_WORK/scope-a", "create"],
    ]);
    expect((await jsm.streams.info("T_WORK")).config.retention).toBe("workqueue");
    expect((await jsm.consumers.info("T_WORK", "scope-a")).config.filter_subject).toBe("t.work.a.>");
  });

  it("is a no-op the second time", async () => {
    const result = await applyStreams(jsm, parseDefinitions(base), { replicas: 1 });
    expect(result.plan.map((e) => e.action)).toEqual(["unchanged", "unchanged", "unchanged"]);
  });

  it("declares a KV bucket the KV client opens and uses", async () => {
    const kv = await new Kvm(nc).open("t_state");
    await kv.put("a", "1");
    await kv.put("a", "2");
    const status = await kv.status();
    expect(status.history).toBe(5);
    expect((await kv.get("a"))?.string()).toBe("2");
  });

  it("applies a compatible change in place and keeps the messages", async () => {
    await jetstream(nc).publish("t.work.b.1", "x");
    const result = await applyStreams(jsm, parseDefinitions(withChange(0, { max_msgs: 200, description: "work" })), { replicas: 1 });
    expect(result.plan[0]).toMatchObject({ action: "update", destructive: false });
    const info = await jsm.streams.info("T_WORK");
    expect(info.config.max_msgs).toBe(200);
    expect(info.state.messages).toBe(1);
  });

  it("refuses a retention change or a shrunk limit without force and applies nothing", async () => {
    const lines: string[] = [];
    const shrink = parseDefinitions(withChange(0, { max_msgs: 10, description: "work" }));
    const result = await applyStreams(jsm, shrink, { replicas: 1, progress: (l) => lines.push(l) });
    expect(result.applied).toBe(false);
    expect(result.refused.map((e) => e.label)).toEqual(["stream T_WORK"]);
    expect(lines[0]).toContain("max_msgs 200 -> 10 (destructive)");
    expect((await jsm.streams.info("T_WORK")).config.max_msgs).toBe(200);

    const retention = parseDefinitions(withChange(0, { retention: "limits", max_msgs: 200, description: "work" }));
    await expect(ensureStreams(jsm, retention, { replicas: 1 })).rejects.toThrow(StreamsRefusedError);
    expect((await jsm.streams.info("T_WORK")).config.retention).toBe("workqueue");
  });

  it("re-creates with force", async () => {
    const retention = parseDefinitions(withChange(0, { retention: "limits", max_msgs: 200, description: "work" }));
    const result = await applyStreams(jsm, retention, { replicas: 1, force: true });
    expect(result.plan[0]).toMatchObject({ action: "recreate", destructive: true });
    expect(result.applied).toBe(true);
    expect((await jsm.streams.info("T_WORK")).config.retention).toBe("limits");
  });

  it("dry run reports without changing", async () => {
    const result = await applyStreams(jsm, parseDefinitions(withChange(2, { history: 10 })), { replicas: 1, dryRun: true });
    expect(result.applied).toBe(false);
    expect(result.plan.find((e) => e.label === "kv t_state")?.changes).toEqual([{ field: "max_msgs_per_subject", from: 5, to: 10, effect: "update" }]);
    expect((await new Kvm(nc).open("t_state").then((kv) => kv.status())).history).toBe(5);
  });

  it("loads and validates the package's own streams/ directory", async () => {
    const defs = loadDefinitions();
    expect(defs.some((d) => d.kind === "kv" && d.bucket === "tg_config")).toBe(true);
    const first = await applyStreams(jsm, defs, { replicas: 1 });
    expect(first.applied).toBe(true);
    const second = await applyStreams(jsm, defs, { replicas: 1 });
    expect(second.plan.every((e) => e.action === "unchanged")).toBe(true);
  });

  it("rejects invalid definitions with a clear message", () => {
    expect(() => parseDefinitions([{ kind: "consumer", stream: "NOPE", durable_name: "x" }])).toThrow(DefinitionsError);
    expect(() => parseDefinitions([{ kind: "stream", name: "a.b", subjects: ["x"] }])).toThrow(/no dots/);
  });
});
