import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CancelRequested, ToolRunner, type ToolContext } from "../../src/runner/index.js";
import { startTestNats, type TestNats } from "../helpers/nats.js";
import { publishTasksAgent } from "./helpers/tasks-agent.js";
import { startExecutionGateway, SHORT_LEASES, type TestGateway } from "../helpers/execution-gateway.js";
import { until } from "../helpers/until.js";
import { onAbort } from "../helpers/abort.js";

/** `runner.detach()` and `runner.close({ deadlineMs })` against the real gateway. */
describe("ToolRunner leaving: detach and close", () => {
  let nats: TestNats;
  let gw: TestGateway;
  let dir: string;
  const gates = new Map<string, () => void>();
  const signals = new Map<string, string>();

  beforeAll(async () => {
    nats = await startTestNats();
    gw = await startExecutionGateway(nats.url, SHORT_LEASES);
    dir = mkdtempSync(join(tmpdir(), "toolgate-lifecycle-"));
  });
  afterAll(async () => {
    for (const open of gates.values()) open();
    await gw?.close();
    await nats?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** A runner whose `tasks.create` waits for its title's gate, and `tasks.read` for its cursor's (ignoring ctx.signal, which is recorded). */
  async function startRunner(
    scope: string,
  ): Promise<{ runner: ToolRunner; toolCall: (title: string) => Promise<string>; readCall: (cursor: string) => Promise<string> }> {
    const { sessionId } = await publishTasksAgent(gw, {
      scope,
      readBinding: `${scope}-read`,
      writeBinding: `${scope}-write`,
      agent: `${scope}-agent`,
      executorId: `${scope}-exec`,
    });
    const runner = await ToolRunner.start({
      natsUrl: nats.url,
      executorId: `${scope}-exec`,
      scope,
      store: join(dir, `${scope}.db`),
      logger: pino({ level: "silent" }),
      authorize: () => true,
      answerTimeoutMs: 500,
      requestTimeoutMs: 1_000,
      pullExpiresMs: 1_000,
      releaseDelayMs: 100,
      tools: {
        "tasks.create": {
          kind: "write",
          bindingId: `${scope}-write`,
          async handler(ctx: ToolContext<{ title: string }>) {
            onAbort(ctx.signal, () => signals.set(ctx.arguments.title, (ctx.signal.reason as CancelRequested).kind));
            await new Promise<void>((resolve) => gates.set(ctx.arguments.title, resolve));
            return { created: ctx.arguments.title };
          },
        },
        "tasks.read": {
          kind: "read",
          bindingId: `${scope}-read`,
          async handler(ctx: ToolContext<{ cursor: string }>) {
            onAbort(ctx.signal, () => signals.set(ctx.arguments.cursor, (ctx.signal.reason as CancelRequested).kind));
            await new Promise<void>((resolve) => gates.set(ctx.arguments.cursor, resolve));
            return { read: ctx.arguments.cursor };
          },
        },
      },
    });
    const runId = (await gw.api("POST", `/v1/sessions/${sessionId}/runs`)).run_id;
    const toolCall = async (title: string) =>
      (await gw.api("POST", `/v1/runs/${runId}/tool-calls`, { tool_name: "tasks.create", arguments: { title } })).assignment.assignment_id as string;
    const readCall = async (cursor: string) =>
      (await gw.api("POST", `/v1/runs/${runId}/tool-calls`, { tool_name: "tasks.read", arguments: { cursor } })).assignment.assignment_id as string;
    return { runner, toolCall, readCall };
  }
  const get = (id: string) => gw.api("GET", `/v1/assignments/${id}`);
  const untilState = (id: string, state: string) => until(`${id} to be ${state}`, async () => ((await get(id)).state === state ? get(id) : undefined));

  it("detach(): stops taking work, lets the confirmed work finish and be answered, then resolves", async () => {
    const { runner, toolCall } = await startRunner("drain");
    const running = await toolCall("finish me");
    await untilState(running, "running");
    await until("the handler", () => gates.get("finish me"));
    const detached = runner.detach();
    const waiting = await toolCall("nobody takes me");
    gates.get("finish me")!();
    await detached;
    expect((await get(running)).state).toBe("completed"); // answered before detach resolved
    expect(signals.has("finish me")).toBe(false); // detaching is no cancel
    expect(await get(waiting)).toMatchObject({ state: "pending", generation: 0, executor_id: null });
    await runner.close({ deadlineMs: 1_000 });
  });

  it("close({ deadlineMs }): waits for handlers up to the deadline, reports the rest reconciliation_required (executor_shutdown)", async () => {
    const { runner, toolCall, readCall } = await startRunner("shut");
    const quick = await toolCall("quick");
    const stuck = await toolCall("stuck");
    const stuckRead = await readCall("stuck read");
    await until("the handlers", () => (gates.has("quick") && gates.has("stuck") && gates.has("stuck read") ? true : undefined));
    // A write runs marked `running`; a read, which has no side effects to mark, runs `confirmed` (it
    // started once its `accepted` was sent, and the answer confirms it meanwhile).
    await until("the read confirmed", async () => ((await runner.assignment(stuckRead))?.phase === "confirmed" ? true : undefined));
    expect((await runner.assignment(stuck))?.phase).toBe("running");
    const closed = runner.close({ deadlineMs: 1_500 });
    gates.get("quick")!(); // finishes within the deadline
    await closed;
    expect((await get(quick)).state).toBe("completed");
    for (const id of [stuck, stuckRead]) {
      const reported = await get(id);
      expect([reported.state, reported.outcome.error.code]).toEqual(["reconciliation_required", "executor_shutdown"]);
    }
    expect([signals.get("stuck"), signals.get("stuck read")]).toEqual(["shutdown", "shutdown"]);
    expect(signals.has("quick")).toBe(false);
  });
});
