import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkHistory, readHistory } from "../../src/checker/index.js";
import { SubmissionRefused, ToolRunner, UnknownTaskError, type TaskStopRequest, type ToolDefinition } from "../../src/runner/index.js";
import { submission } from "../../src/runner/tools.js";
import { Receipt, TASK_STATUS_MAX_BYTES } from "../../src/wire/messages.js";
import { startTestNats, type TestNats } from "../helpers/nats.js";
import { SseClient } from "../helpers/sse-client.js";
import { ADMIN_KEY, SHORT_LEASES, startExecutionGateway, type TestGateway } from "../helpers/execution-gateway.js";
import { until } from "../helpers/until.js";
import { FAST_RUNNER_TIMING } from "./helpers/tasks-agent.js";

const SCOPE = "reports-product";
const BINDING = "reports-write";
const EXECUTOR = "exec-reports";
const FIXTURE = fileURLToPath(new URL("../fixtures/crash-executor.ts", import.meta.url));

/** A result well over the 1 KiB budget of `reports.generate`: its history entry is a projection. */
const bigReport = (ref: string) => ({ report: ref, rows: Array.from({ length: 60 }, (_, i) => ({ row: i, text: `line ${i} of the quarterly report` })) });

describe("async business tasks: submit now, the outcome later (real NATS, real gateway, real SQLite)", () => {
  let nats: TestNats;
  let gw: TestGateway;
  let nc: NatsConnection;
  let dir: string;
  let runner: ToolRunner;
  let sessionId: string;
  /** What the product's business system was asked to stop. */
  const stops: TaskStopRequest[] = [];
  /** Set by a test: how the product answers a stop request. */
  let onStop: (request: TaskStopRequest) => Promise<void> = async () => undefined;
  const children: ChildProcess[] = [];

  beforeAll(async () => {
    nats = await startTestNats();
    gw = await startExecutionGateway(nats.url, SHORT_LEASES);
    nc = await connect({ servers: nats.url });
    dir = mkdtempSync(join(tmpdir(), "toolgate-async-"));
    await gw.api("POST", "/v1/bindings", { binding_id: BINDING, executor_scope: SCOPE, tool_kind: "write" });
    await gw.api("POST", "/v1/executors", { executor_id: EXECUTOR, scope: SCOPE, bindings: [BINDING] });
    const input_schema = { type: "object", properties: { title: { type: "string" } }, required: ["title"] };
    await gw.api("POST", "/v1/toolsets/reports-tools/versions", {
      version: "v1",
      tools: [
        {
          name: "reports.generate",
          description: "Generate a report in the background",
          binding_id: BINDING,
          input_schema,
          output_schema: { type: "object" },
          max_result_context_bytes: 1024,
        },
        {
          name: "reports.quick",
          description: "A report that must be done within 1.5 s",
          binding_id: BINDING,
          input_schema,
          output_schema: { type: "object" },
          task_deadline_ms: 1_500,
        },
      ],
    });
    const agent = await gw.api("POST", "/v1/agents/reports-agent/versions", { toolset: "reports-tools", toolset_version: "v1", max_context_tokens: 100_000 });
    sessionId = (await gw.api("POST", "/v1/sessions", { agent_version: agent.agent_version, subject: "user-42" })).session_id;

    const report: ToolDefinition<{ title: string }> = {
      kind: "write",
      bindingId: BINDING,
      async handler(ctx) {
        await ctx.progress({ step: "queued" });
        if (ctx.arguments.title === "oversized")
          return ctx.submit({ task_ref: `job-${ctx.grant.assignment_id}`, status: "x".repeat(TASK_STATUS_MAX_BYTES + 1) });
        return ctx.submit({ task_ref: `job-${ctx.grant.assignment_id}`, status: `report '${ctx.arguments.title}' queued, about a minute` });
      },
      async compensate(ctx) {
        return { withdrawn: ctx.compensates.result };
      },
      async cancelTask(request) {
        stops.push(request);
        await onStop(request);
      },
    };
    runner = await ToolRunner.start({
      nc,
      executorId: EXECUTOR,
      scope: SCOPE,
      store: join(dir, "reports.db"),
      logger: pino({ level: process.env.TEST_RUNNER_LOG ?? "silent" }),
      authorize: () => true,
      ...FAST_RUNNER_TIMING,
      tools: { "reports.generate": report, "reports.quick": report },
    });
  });

  afterAll(async () => {
    for (const child of children) child.kill("SIGKILL");
    await runner?.close({ deadlineMs: 1_000 });
    await nc?.close();
    await gw?.close();
    await nats?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  async function submitted(toolName: string, title: string, session = sessionId): Promise<{ runId: string; assignmentId: string; taskRef: string }> {
    const run = await gw.api("POST", `/v1/sessions/${session}/runs`);
    const { assignment } = await gw.api("POST", `/v1/runs/${run.run_id}/tool-calls`, { tool_name: toolName, arguments: { title }, tool_call_id: "call-1" });
    const a = await inState(assignment.assignment_id, "submitted");
    return { runId: run.run_id, assignmentId: a.assignment_id, taskRef: a.task.task_ref };
  }

  const inState = (assignmentId: string, ...states: string[]) =>
    until(
      `assignment ${assignmentId} in ${states.join("/")}`,
      async () => {
        const a = await gw.api("GET", `/v1/assignments/${assignmentId}`);
        return states.includes(a.state) ? a : undefined;
      },
      20_000,
    );

  const localReceipts = (assignmentId: string) =>
    until(
      `local receipts of ${assignmentId} answered`,
      async () => {
        const local = await runner.assignment(assignmentId);
        return local && local.receipts.every((r) => r.answer) && local.phase !== "submitted" ? local : undefined;
      },
      20_000,
    );

  it("answers the tool call with the submission at once, then takes progress and the completed result as its own history entry", async () => {
    const { runId, assignmentId, taskRef } = await submitted("reports.generate", "Q3");
    const events = await SseClient.open(`${gw.baseUrl}/v1/runs/${runId}/events`, { authorization: `Bearer ${ADMIN_KEY}` });
    try {
      const before = await gw.api("GET", `/v1/runs/${runId}/history`);
      const submission = { task_ref: taskRef, status: "report 'Q3' queued, about a minute" };
      expect(before.tool_calls[0]).toMatchObject({ state: "submitted", task: submission, context_preview: { truncated: false, result: submission } });
      expect(before.task_results).toEqual([]);
      expect((await gw.api("GET", `/v1/runs/${runId}/tasks`)).tasks).toMatchObject([
        { assignment_id: assignmentId, tool_call_id: "call-1", state: "submitted", task: submission, results: 0 },
      ]);
      // The run is not blocked: the model makes its next call while the report is being generated.
      const next = await gw.api("POST", `/v1/runs/${runId}/tool-calls`, { tool_name: "reports.generate", arguments: { title: "Q4" }, tool_call_id: "call-2" });
      const second = await inState(next.assignment.assignment_id, "submitted");

      await runner.tasks.progress(taskRef, { pages_done: 2 });
      await until("task progress stored", async () => ((await gw.api("GET", `/v1/assignments/${assignmentId}`)).progress.length === 2 ? true : undefined));
      await runner.tasks.complete(taskRef, bigReport(taskRef));
      const a = await inState(assignmentId, "completed");
      expect(a.progress.map((p: { seq: number; progress: unknown }) => [p.seq, p.progress])).toEqual([
        [1, { step: "queued" }],
        [2, { pages_done: 2 }],
      ]);
      expect(a.context_preview).toMatchObject({ truncated: true, max_result_context_bytes: 1024 });

      const after = await until("task result in history", async () => {
        const h = await gw.api("GET", `/v1/runs/${runId}/history`);
        return h.task_results.length === 1 ? h : undefined;
      });
      // What the model saw before stays as it was; the result is a new entry after the two calls, projected once with the tool's budget.
      expect(after.tool_calls[0].context_preview).toEqual(before.tool_calls[0].context_preview);
      expect(after.task_results[0]).toMatchObject({
        assignment_id: assignmentId,
        tool_call_id: "call-1",
        task_ref: taskRef,
        state: "completed",
        after_tool_calls: 2,
        receipt_id: a.final_receipt_id,
        outcome: null,
      });
      expect(after.task_results[0].context_preview).toEqual(a.context_preview);
      expect(after.task_results[0].context_preview.retained_bytes).toBeLessThanOrEqual(1024);
      await events.until("the task_result event", (e) => e.some((x) => x.data.type === "task_result" && x.data.assignment_id === assignmentId));
      const types = events.events
        .filter((e) => e.data.assignment_id === assignmentId)
        .map((e) => (e.data.type === "assignment" ? `${e.data.from}->${e.data.to}` : e.data.type));
      expect(types).toEqual(expect.arrayContaining(["submitted->completed", "progress", "task_result"]));
      // The task view: both tasks, the first completed with its one result and its progress.
      const view = await gw.api("GET", `/v1/runs/${runId}/tasks`);
      expect(view.tasks.map((t: { assignment_id: string; state: string; results: number }) => [t.assignment_id, t.state, t.results])).toEqual([
        [assignmentId, "completed", 1],
        [second.assignment_id, "submitted", 0],
      ]);
      expect(view.tasks[0].progress.map((p: { seq: number }) => p.seq)).toEqual([1, 2]);

      const local = await localReceipts(assignmentId);
      expect(local.phase).toBe("settled");
      expect(local.receipts.map((r) => [r.kind, r.answer?.status])).toEqual([
        ["accepted", "recorded"],
        ["progress", "recorded"],
        ["submission", "recorded"],
        ["progress", "recorded"],
        ["completed", "recorded"],
      ]);
      await expect(runner.tasks.complete(taskRef, {})).rejects.toBeInstanceOf(UnknownTaskError);
      await runner.tasks.complete(second.task.task_ref, { report: "Q4" });
      await inState(second.assignment_id, "completed");
    } finally {
      await events.close();
    }
  });

  it("compensates a completed async write as a synchronous one: a new operation, the task's result entry untouched", async () => {
    const { runId, assignmentId, taskRef } = await submitted("reports.generate", "to undo");
    await runner.tasks.complete(taskRef, { report: taskRef, published: true });
    await inState(assignmentId, "completed");
    const before = await until("the task result", async () => {
      const h = await gw.api("GET", `/v1/runs/${runId}/history`);
      return h.task_results.length === 1 ? h : undefined;
    });
    const { created, compensation } = await gw.api("POST", `/v1/assignments/${assignmentId}:compensate`);
    expect(created).toBe(true);
    const done = await inState(compensation.assignment_id, "completed");
    expect(done.context_preview.result).toEqual({ withdrawn: { report: taskRef, published: true } });
    const after = await gw.api("GET", `/v1/runs/${runId}/history`);
    expect(after.task_results).toEqual(before.task_results);
    expect(after.tool_calls[0].compensated_by).toBe(compensation.assignment_id);
  });

  it("bounds the submission by schema: an oversized status is refused at ctx.submit with submission_too_large", async () => {
    // Bytes, not characters: 600 two-byte characters are over the 1,024-byte bound.
    expect(() => submission({ task_ref: "job-1", status: "é".repeat(600) })).toThrow(expect.objectContaining({ code: "submission_too_large" }));
    expect(() => submission({ task_ref: "", status: "ok" })).toThrow(SubmissionRefused);
    const wire = { receipt_id: "r1", assignment_id: "a1", executor_id: "e1", claim_token: "t".repeat(43), kind: "submission", task_ref: "job-1" };
    expect(Receipt.safeParse({ ...wire, status: "x".repeat(TASK_STATUS_MAX_BYTES) }).success).toBe(true);
    expect(Receipt.safeParse({ ...wire, status: "x".repeat(TASK_STATUS_MAX_BYTES + 1) }).success).toBe(false);

    // In a handler it throws before anything is sent; the job may have been started, so the call needs reconciliation.
    const run = await gw.api("POST", `/v1/sessions/${sessionId}/runs`);
    const { assignment } = await gw.api("POST", `/v1/runs/${run.run_id}/tool-calls`, { tool_name: "reports.generate", arguments: { title: "oversized" } });
    const a = await inState(assignment.assignment_id, "reconciliation_required");
    expect(a.outcome.error.message).toContain("submission_too_large");
    expect(a.task).toBeNull();
    await runner.reconcile(a.assignment_id, { kind: "failed", code: "not_started", message: "the job was never queued" });
    await inState(a.assignment_id, "failed");
  });

  it("sends a task past its tool's deadline to reconciliation_required (no lease applies), and a late completion still settles it", async () => {
    const { runId, assignmentId, taskRef } = await submitted("reports.quick", "late");
    const a = await inState(assignmentId, "reconciliation_required");
    expect(a.outcome.error.code).toBe("task_deadline_passed");
    expect(Date.parse(a.task.deadline_at) - Date.parse(a.task.submitted_at)).toBe(1_500);
    const expired = await gw.api("GET", `/v1/runs/${runId}/history`);
    expect(expired.task_results).toMatchObject([{ state: "reconciliation_required", receipt_id: null, outcome: { error: { code: "task_deadline_passed" } } }]);

    await runner.tasks.complete(taskRef, { report: "late but done" });
    const done = await inState(assignmentId, "completed");
    const history = await until("the completion's own entry", async () => {
      const h = await gw.api("GET", `/v1/runs/${runId}/history`);
      return h.task_results.length === 2 ? h : undefined;
    });
    expect(history.task_results[0]).toEqual(expired.task_results[0]);
    expect(history.task_results[1]).toMatchObject({
      state: "completed",
      receipt_id: done.final_receipt_id,
      context_preview: { result: { report: "late but done" } },
    });
  });

  it("a business-task cancel asks the product to stop; cancel and completion race and exactly one outcome is taken", async () => {
    const outcomes: PromiseSettledResult<void>[][] = [];
    onStop = async (request) => {
      // The business system finished just as the stop arrived: both reports race.
      outcomes.push(
        await Promise.allSettled([
          runner.tasks.cancelled(request.task_ref, "stopped on request"),
          runner.tasks.complete(request.task_ref, { report: "finished first" }),
        ]),
      );
    };
    try {
      const { runId, assignmentId, taskRef } = await submitted("reports.generate", "race");
      const asked = await gw.api("POST", `/v1/assignments/${assignmentId}:cancel-task`, { reason: "the user changed their mind" });
      expect(asked).toMatchObject({ state: "submitted", task_cancel: { reason: "the user changed their mind" } });
      const a = await inState(assignmentId, "cancelled", "completed");
      await until("the product's stop hook ran", () => (outcomes.length === 1 ? true : undefined));
      expect(stops.filter((s) => s.task_ref === taskRef).map((s) => [s.kind, s.reason])).toEqual([["task_cancel_requested", "the user changed their mind"]]);
      const [cancelled, completed] = outcomes[0]!;
      expect([cancelled!.status, completed!.status].sort()).toEqual(["fulfilled", "rejected"]);
      const rejected = [cancelled, completed].find((o) => o!.status === "rejected") as PromiseRejectedResult;
      expect(rejected.reason).toBeInstanceOf(UnknownTaskError);
      expect(a.state).toBe(cancelled!.status === "fulfilled" ? "cancelled" : "completed");
      const local = await localReceipts(assignmentId);
      expect(local.receipts.filter((r) => ["completed", "cancelled"].includes(r.kind))).toHaveLength(1);
      const history = await gw.api("GET", `/v1/runs/${runId}/history`);
      expect(history.task_results.map((t: { state: string }) => t.state)).toEqual([a.state]);
    } finally {
      onStop = async () => undefined;
    }
  });

  it("a run cancelled while its task runs: the task is abandoned, the product told, and the late completion is stored but never revives the run", async () => {
    const { runId, assignmentId, taskRef } = await submitted("reports.generate", "abandoned");
    await gw.api("POST", `/v1/runs/${runId}:cancel`);
    const a = await inState(assignmentId, "abandoned");
    await until("the product is told the run ended", () => (stops.some((s) => s.task_ref === taskRef && s.kind === "run_cancelled") ? true : undefined));

    await runner.tasks.complete(taskRef, { report: "done anyway" });
    const local = await localReceipts(assignmentId);
    expect(local.receipts.at(-1)).toMatchObject({ kind: "completed", answer: { status: "late_ignored", code: "run_terminated" } });
    expect((await gw.api("GET", `/v1/assignments/${assignmentId}`)).state).toBe("abandoned");
    const run = await gw.api("GET", `/v1/runs/${runId}/history`);
    expect(run.state).toBe("cancelled");
    expect(run.task_results).toEqual([]);
    expect(a.task.task_ref).toBe(taskRef);
  });

  it("submit, the gateway restarts, the product completes while no gateway is up: delivered once one is back", async () => {
    const { runId, assignmentId, taskRef } = await submitted("reports.generate", "gateway-restart");
    await gw.close();
    // Saved in the runner's store now, sent when a gateway answers.
    await runner.tasks.complete(taskRef, { report: "done while the gateway was away" });
    gw = await startExecutionGateway(nats.url, SHORT_LEASES);
    await inState(assignmentId, "completed");
    const history = await until("the task result", async () => {
      const h = await gw.api("GET", `/v1/runs/${runId}/history`);
      return h.task_results.length === 1 ? h : undefined;
    });
    expect(history.task_results[0]).toMatchObject({ state: "completed", context_preview: { result: { report: "done while the gateway was away" } } });
  });

  it("an executor detach leaves a submitted task to the scope: it stays submitted and is settled later (the runner stays detached after this)", async () => {
    const { assignmentId, taskRef } = await submitted("reports.generate", "detached");
    const detached = await gw.api("POST", `/v1/executors/${EXECUTOR}:detach`, { scope: SCOPE });
    expect([...detached.released, ...detached.reconciliation_required, ...detached.retried]).not.toContain(assignmentId);
    expect((await gw.api("GET", `/v1/assignments/${assignmentId}`)).state).toBe("submitted");
    await runner.tasks.complete(taskRef, { report: "done after the detach" });
    await inState(assignmentId, "completed");
  });

  it("submit, the executor is SIGKILLed right after saving the submission, restarts and completes the task from its store", async () => {
    const { session, env } = await crashScope("reports-crash", ["reports.generate"]);
    const first = startExecutor(env);
    const run = await gw.api("POST", `/v1/sessions/${session}/runs`);
    const { assignment } = await gw.api("POST", `/v1/runs/${run.run_id}/tool-calls`, { tool_name: "reports.generate", arguments: { title: "crash" } });
    expect(await exited(first)).toBe("SIGKILL");
    // Killed before the submission was sent: the gateway still has confirmed work.
    expect((await gw.api("GET", `/v1/assignments/${assignment.assignment_id}`)).state).toBe("running");

    startExecutor(env); // same store: resends the submission (replayed), then its business system completes the task it holds
    const a = await inState(assignment.assignment_id, "completed");
    expect(a.task.task_ref).toBe(`job-${assignment.assignment_id}`);
    const history = await until("the task result", async () => {
      const h = await gw.api("GET", `/v1/runs/${run.run_id}/history`);
      return h.task_results.length === 1 ? h : undefined;
    });
    expect(history.task_results[0]).toMatchObject({ state: "completed", context_preview: { result: { report: `job-${assignment.assignment_id}`, pages: 3 } } });
  });

  it("after a restart, a held task's report waits for its saved submission to go out first, though another claim resumes ahead of it", async () => {
    const crash = await crashScope("reports-order", ["tasks.create", "reports.generate"]);
    const session = crash.session;
    const env = {
      ...crash.env,
      // The write stays running across the restart, where its claim resumes ahead of the task's and waits for an answer.
      HANDLER_HOLD_MS: "60000",
      // The business system reports the held task the moment the restarted runner is there.
      TASK_WORK_MS: "0",
    };
    const first = startExecutor(env);
    const run = await gw.api("POST", `/v1/sessions/${session}/runs`);
    const write = (await gw.api("POST", `/v1/runs/${run.run_id}/tool-calls`, { tool_name: "tasks.create", arguments: { title: "slow" } })).assignment;
    await inState(write.assignment_id, "running");
    const report = (await gw.api("POST", `/v1/runs/${run.run_id}/tool-calls`, { tool_name: "reports.generate", arguments: { title: "order" } })).assignment;
    expect(await exited(first)).toBe("SIGKILL");

    startExecutor(env);
    const a = await inState(report.assignment_id, "completed");
    // The submission was applied before the task's result: the call is a task, its result an entry of its own.
    expect(a.task?.task_ref).toBe(`job-${report.assignment_id}`);
    const history = await until("the task result", async () => {
      const h = await gw.api("GET", `/v1/runs/${run.run_id}/history`);
      return h.task_results.length === 1 ? h : undefined;
    });
    expect(history.task_results[0]).toMatchObject({ assignment_id: report.assignment_id, state: "completed" });
    expect((await inState(write.assignment_id, "reconciliation_required")).state).toBe("reconciliation_required");
  });

  it("leaves a history the checker finds consistent: every task settled once, each settlement its own entry", async () => {
    await until("no submitted task left", async () => {
      const h = await readHistory(nc);
      return h.assignments.every((a) => a.value.state !== "submitted") ? true : undefined;
    });
    const report = checkHistory(await readHistory(nc));
    expect(report.violations).toEqual([]);
    expect(report.counts.tool_calls.completed).toBeGreaterThanOrEqual(5);
  });

  /**
   * A scope served by the crash executor (test/fixtures/crash-executor.ts), which SIGKILLs itself once
   * right after saving a submission: its bindings, a toolset of `tools` (`tasks.create` a write,
   * `reports.generate` a write that submits a task) and a session, and the executor's environment.
   */
  async function crashScope(scope: string, tools: Array<"tasks.create" | "reports.generate">) {
    const binding = `${scope}-write`;
    const taskBinding = `${scope}-task`;
    await gw.api("POST", "/v1/bindings", { binding_id: binding, executor_scope: scope, tool_kind: "write" });
    await gw.api("POST", "/v1/bindings", { binding_id: taskBinding, executor_scope: scope, tool_kind: "write" });
    const described = { "tasks.create": ["Create a task", binding], "reports.generate": ["Generate a report", taskBinding] } as const;
    await gw.api("POST", `/v1/toolsets/${scope}-tools/versions`, {
      version: "v1",
      tools: tools.map((name) => ({
        name,
        description: described[name][0],
        binding_id: described[name][1],
        input_schema: { type: "object" },
        output_schema: { type: "object" },
      })),
    });
    const agent = await gw.api("POST", `/v1/agents/${scope}-agent/versions`, { toolset: `${scope}-tools`, toolset_version: "v1", max_context_tokens: 100_000 });
    const session: string = (await gw.api("POST", "/v1/sessions", { agent_version: agent.agent_version, subject: "user-42" })).session_id;
    const env: Record<string, string> = {
      NATS_URL: nats.url,
      RUNNER_STORE: join(dir, `${scope}.db`),
      EFFECTS_DB: join(dir, `${scope}-effects.db`),
      EXECUTOR_ID: `exec-${scope}`,
      SCOPE: scope,
      BINDING: binding,
      TASK_BINDING: taskBinding,
      TOOLGATE_TASK_CRASH: "after_submission_saved",
    };
    return { session, env };
  }

  function startExecutor(env: Record<string, string>): ChildProcess {
    const child = spawn(process.execPath, ["--import", "tsx", FIXTURE], {
      env: { ...process.env, LOG_LEVEL: "warn", ...env },
      stdio: ["ignore", "ignore", "pipe"],
    });
    child.stderr!.resume();
    children.push(child);
    return child;
  }

  const exited = (child: ChildProcess) =>
    new Promise<NodeJS.Signals | number | null>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve(child.signalCode ?? child.exitCode);
      child.once("exit", (code, signal) => resolve(signal ?? code));
    });
});
