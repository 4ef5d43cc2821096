import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type Msg, type NatsConnection } from "@nats-io/transport-node";
import { createLogger } from "../../src/log/logger.js";
import { SqliteRunnerStore, type ToolRunner } from "../../src/runner/index.js";
import { decode } from "../../src/wire/codec.js";
import { ReceiptMessage, type Receipt } from "../../src/wire/messages.js";
import { itemsOf } from "../../src/wire/primitives.js";
import { subjects } from "../../src/wire/subjects.js";
import { startTestNats, type TestNats } from "../helpers/nats.js";
import { lineSink } from "../security/helpers.js";
import { publishTasksAgent, scopedTasksAgent, startTasksReadRunner } from "./helpers/tasks-agent.js";
import { startExecutionGateway, SHORT_LEASES, type TestGateway } from "../helpers/execution-gateway.js";
import { until } from "../helpers/until.js";

const SCOPE = "send";
const EXECUTOR = "exec-send";

/** A receipt as the runner put it on the wire: whether it asked for the stream's PubAck (a reply subject), and in which message (a chain's carry several). */
interface Sent {
  kind: Receipt["kind"];
  receiptId: string;
  asksPubAck: boolean;
  message: number;
}

/**
 * A receipt's first send asks for no PubAck (the gateway's answer confirms it); a resend asks for one,
 * since a copy the stream de-duplicated would otherwise wait for an answer that never comes.
 */
describe("ToolRunner: how receipts are sent", () => {
  let nats: TestNats;
  let gw: TestGateway;
  let nc: NatsConnection;
  let runner: ToolRunner;
  let dir: string;
  let sessionId: string;
  let release!: () => void;
  const sent: Sent[] = [];
  let messages = 0;
  const sink = lineSink();

  beforeAll(async () => {
    nats = await startTestNats();
    gw = await startExecutionGateway(nats.url, SHORT_LEASES);
    nc = await connect({ servers: nats.url });
    nc.subscribe(subjects.receipt(SCOPE, EXECUTOR, "*"), {
      callback: (_err, m: Msg) => {
        messages++;
        for (const r of itemsOf(decode(ReceiptMessage, m.data)))
          sent.push({ kind: r.kind, receiptId: r.receipt_id, asksPubAck: (m.reply ?? "") !== "", message: messages });
      },
    });
    await nc.flush();
    dir = mkdtempSync(join(tmpdir(), "toolgate-send-"));
    ({ sessionId } = await publishTasksAgent(gw, scopedTasksAgent(SCOPE, EXECUTOR)));
    runner = await startTasksReadRunner({
      natsUrl: nats.url,
      executorId: EXECUTOR,
      scope: SCOPE,
      store: new SqliteRunnerStore(join(dir, "runner.db")),
      logger: createLogger({ name: "toolgate-runner", level: "info", destination: sink.stream }),
      // Long enough for a read's outcome to be saved however loaded the machine: its three leave together.
      acceptedLingerMs: 2_000,
      async handler(ctx) {
        await ctx.progress({ step: 1 });
        if (ctx.arguments.cursor === "hold") await new Promise<void>((resolve) => (release = resolve));
        return { tasks: [] };
      },
    });
  });
  afterAll(async () => {
    await runner?.close({ deadlineMs: 1_000 });
    await nc?.close();
    await gw?.close();
    await nats?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const call = async (cursor: string) => {
    const run = await gw.api("POST", `/v1/sessions/${sessionId}/runs`);
    const { assignment } = await gw.api("POST", `/v1/runs/${run.run_id}/tool-calls`, { tool_name: "tasks.read", arguments: { cursor } });
    return assignment.assignment_id as string;
  };
  const stateOf = async (id: string) => (await gw.api("GET", `/v1/assignments/${id}`)).state as string;

  it("sends each receipt once, without asking for a PubAck, a read's three in one message, when the gateway answers", async () => {
    sent.length = 0;
    const id = await call("now");
    await until("the call completed", async () => ((await stateOf(id)) === "completed" ? true : undefined));
    const [first] = sent;
    expect(sent.map((s) => [s.kind, s.asksPubAck, s.message - first!.message])).toEqual([
      ["accepted", false, 0],
      ["progress", false, 0],
      ["completed", false, 0],
    ]);
  });

  it("resends a receipt nobody answered, asking for a PubAck, and completes once a gateway is back", async () => {
    sent.length = 0;
    const id = await call("hold");
    await until("the handler is running", async () => ((await stateOf(id)) === "running" && sent.some((s) => s.kind === "progress") ? true : undefined));
    await gw.close();
    release();
    // The first send of `completed` reaches the stream, but no gateway takes it; the runner asks `tg.rq`
    // (unanswered) and resends, asking for a PubAck this time (the stream drops it as a duplicate).
    await until("the completed receipt resent", async () => (sent.filter((s) => s.kind === "completed").length >= 2 ? true : undefined));
    const completed = sent.filter((s) => s.kind === "completed");
    expect(completed[0]!.asksPubAck).toBe(false);
    expect(completed.slice(1).every((s) => s.asksPubAck && s.receiptId === completed[0]!.receiptId)).toBe(true);
    gw = await startExecutionGateway(nats.url, SHORT_LEASES);
    await until("the call completed", async () => ((await stateOf(id)) === "completed" ? true : undefined));
  });
});
