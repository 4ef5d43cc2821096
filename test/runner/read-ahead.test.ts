import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CancelRequested, SqliteRunnerStore, ToolRunner, type PhaseChange, type StoredAnswer, type ToolContext } from "../../src/runner/index.js";
import { ClaimExecution, type ExecutionHost, type RegisteredTool } from "../../src/runner/claim-execution.js";
import { buildReceipt } from "../../src/runner/receipts.js";
import { transition } from "../../src/runner/phases.js";
import type { OutboxReceipt } from "../../src/runner/store.js";
import { candidateConsumer, STREAMS } from "../../src/streams/names.js";
import { decode } from "../../src/wire/codec.js";
import { ReceiptMessage, type Grant } from "../../src/wire/messages.js";
import { itemsOf } from "../../src/wire/primitives.js";
import { receiptId } from "../../src/wire/receipt-ids.js";
import { startTestNats, type TestNats } from "../helpers/nats.js";
import { startExecutionGateway, SHORT_LEASES, type TestGateway } from "../helpers/execution-gateway.js";
import { until } from "../helpers/until.js";
import { sampleGrant } from "./helpers/grants.js";
import { FAST_RUNNER_TIMING, publishTasksAgent, scopedTasksAgent, startTasksReadRunner } from "./helpers/tasks-agent.js";
import { ProtocolExecutor } from "../helpers/protocol-executor.js";

const SCOPE = "ahead";
const EXECUTOR = "exec-ahead";
/** Leases long enough for a gateway to be closed and another started before one expires. */
const LEASES = { ...SHORT_LEASES, leaseMs: 20_000 };

/** The SQLite store of a process about to die: once a claim's refusal is recorded, no later answer ever is. */
class StalledAfterRefusal extends SqliteRunnerStore {
  refused = false;
  override async recordAnswer(receiptId: string, answer: StoredAnswer, change?: PhaseChange): Promise<void> {
    if (this.refused) return new Promise(() => undefined);
    await super.recordAnswer(receiptId, answer, change);
    if (change?.to === "refused") this.refused = true;
  }
}

/**
 * A read has no side effects, so the ToolRunner runs its handler once `accepted` is saved instead of
 * once it is answered: the handler and the saving of its outcome overlap the gateway's round trip,
 * and under a gateway that keeps receipts in order its report and outcome leave right behind
 * `accepted`, naming it. The gateway applies them only after a recorded `accepted`; behind a
 * refusal nothing of them is applied, and a handler still running is stopped.
 */
describe("ToolRunner: a read runs while its accepted is answered", () => {
  let nats: TestNats;
  let gw: TestGateway;
  let nc: NatsConnection;
  let runner: ToolRunner;
  let dir: string;
  let sessionId: string;
  /** What `authorize` does for the next grant (after it allowed it), then forgets. */
  let onNextGrant: ((assignmentId: string) => Promise<void>) | undefined;
  let handle: (ctx: ToolContext<{ cursor?: string }>) => Promise<unknown> = async () => ({ tasks: [] });

  beforeAll(async () => {
    nats = await startTestNats();
    gw = await startExecutionGateway(nats.url, LEASES);
    nc = await connect({ servers: nats.url });
    dir = mkdtempSync(join(tmpdir(), "toolgate-ahead-"));
    ({ sessionId } = await publishTasksAgent(gw, scopedTasksAgent(SCOPE, EXECUTOR)));
    runner = await ToolRunner.start({
      natsUrl: nats.url,
      executorId: EXECUTOR,
      scope: SCOPE,
      store: join(dir, "runner.db"),
      logger: pino({ level: process.env.TEST_RUNNER_LOG ?? "silent" }),
      ...FAST_RUNNER_TIMING,
      // Runs after the grant, before `accepted` is saved and sent: the test acts on the gateway there.
      authorize: async (request) => {
        const act = onNextGrant;
        onNextGrant = undefined;
        await act?.(request.assignment_id);
        return true;
      },
      tools: { "tasks.read": { kind: "read", bindingId: `${SCOPE}-read`, handler: (ctx) => handle(ctx as ToolContext<{ cursor?: string }>) } },
    });
  });
  afterAll(async () => {
    await runner?.close({ deadlineMs: 1_000 });
    await nc?.close();
    await gw?.close();
    await nats?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  async function call(): Promise<{ runId: string; assignmentId: string }> {
    const run = await gw.api("POST", `/v1/sessions/${sessionId}/runs`);
    const { assignment } = await gw.api("POST", `/v1/runs/${run.run_id}/tool-calls`, { tool_name: "tasks.read", arguments: {} });
    return { runId: run.run_id, assignmentId: assignment.assignment_id };
  }

  /** The kinds of the receipts the stream holds for one assignment, in order. */
  async function receiptKinds(assignmentId: string): Promise<string[]> {
    const jsm = await jetstreamManager(nc);
    const info = await jsm.streams.info(STREAMS.receipts);
    const kinds: string[] = [];
    for (let seq = info.state.first_seq; seq <= info.state.last_seq; seq++) {
      const m = await jsm.streams.getMessage(STREAMS.receipts, { seq }).catch(() => null);
      if (!m) continue;
      for (const receipt of itemsOf(decode(ReceiptMessage, m.data))) if (receipt.assignment_id === assignmentId) kinds.push(receipt.kind);
    }
    return kinds;
  }

  it("runs, saves and sends its outcome with no gateway to answer accepted; a gateway applies it once accepted is recorded", async () => {
    let ranWhileUnanswered = false;
    // No gateway from the grant on: `accepted` is sent into the stream and waits for one.
    onNextGrant = () => gw.close();
    handle = async (ctx) => {
      await ctx.progress({ step: "page 1" });
      // The read starts while its claim is being saved: the store shows it a turn later, still unanswered.
      ranWhileUnanswered = (await until("the claim saved", () => runner.assignment(ctx.grant.assignment_id))).phase === "accepting";
      return { tasks: ["t-1"] };
    };
    const { assignmentId } = await call();
    // The outcome is saved (`reporting`) and sent behind `accepted`, which still has no answer.
    await until("the outcome saved ahead", async () => ((await runner.assignment(assignmentId))?.phase === "reporting" ? true : undefined));
    expect(ranWhileUnanswered).toBe(true);
    await until("sent behind accepted", async () => ((await receiptKinds(assignmentId)).length === 3 ? true : undefined));
    expect(await receiptKinds(assignmentId)).toEqual(["accepted", "progress", "completed"]);

    gw = await startExecutionGateway(nats.url, LEASES);
    const done = await until("the call completed", async () => {
      const a = await gw.api("GET", `/v1/assignments/${assignmentId}`);
      return a.state === "completed" ? a : undefined;
    });
    expect(done.progress).toEqual([expect.objectContaining({ seq: 1, progress: { step: "page 1" } })]);
    expect(done.context_preview.result).toEqual({ tasks: ["t-1"] });
    await until("settled locally", async () => ((await runner.assignment(assignmentId))?.phase === "settled" ? true : undefined));
  });

  /**
   * A read starts while its claim is being saved: the report it awaits and its outcome, made in the
   * same turn, are queued in the store behind the claim before the claim's save resolves, so the
   * store commits the three in one transaction. The candidate is acknowledged only once the claim
   * is saved, so that its acknowledgement leaves with `accepted` rather than ahead of the commit.
   */
  it("queues its report and outcome behind its claim before the claim's save resolves, and acknowledges its candidate after that save", async () => {
    const scope = `${SCOPE}-one-commit`;
    const executorId = `${EXECUTOR}-one-commit`;
    const { sessionId } = await publishTasksAgent(gw, scopedTasksAgent(scope, executorId));
    const events: string[] = [];
    class RecordingStore extends SqliteRunnerStore {
      override async createAssignment(...args: Parameters<SqliteRunnerStore["createAssignment"]>): Promise<void> {
        events.push("claim queued");
        await super.createAssignment(...args);
        events.push("claim saved");
      }
      override appendReceipt(...args: Parameters<SqliteRunnerStore["appendReceipt"]>): Promise<void> {
        events.push(`${args[0].kind} queued`);
        return super.appendReceipt(...args);
      }
    }
    const jsm = await jetstreamManager(nc);
    let pendingWhileAuthorizing: number | undefined;
    const oneCommit = await ToolRunner.start({
      natsUrl: nats.url,
      executorId,
      scope,
      store: new RecordingStore(join(dir, "one-commit.db")),
      logger: pino({ level: process.env.TEST_RUNNER_LOG ?? "silent" }),
      ...FAST_RUNNER_TIMING,
      authorize: async () => {
        await new Promise((resolve) => setTimeout(resolve, 100)); // long enough for an acknowledgement sent at the grant to be counted
        pendingWhileAuthorizing = (await jsm.consumers.info(STREAMS.candidates, candidateConsumer(scope))).num_ack_pending;
        return true;
      },
      tools: {
        "tasks.read": {
          kind: "read",
          bindingId: `${scope}-read`,
          handler: async (ctx) => {
            await ctx.progress({ step: "page 1" });
            return { tasks: ["t-1"] };
          },
        },
      },
    });
    try {
      const run = await gw.api("POST", `/v1/sessions/${sessionId}/runs`);
      const { assignment } = await gw.api("POST", `/v1/runs/${run.run_id}/tool-calls`, { tool_name: "tasks.read", arguments: {} });
      const done = await until("the call completed", async () => {
        const a = await gw.api("GET", `/v1/assignments/${assignment.assignment_id}`);
        return a.state === "completed" ? a : undefined;
      });
      expect(done.progress).toEqual([expect.objectContaining({ seq: 1, progress: { step: "page 1" } })]);
      expect(events.slice(0, 4)).toEqual(["claim queued", "progress queued", "completed queued", "claim saved"]);
      expect(pendingWhileAuthorizing).toBe(1);
      await until("the candidate acknowledged", async () =>
        (await jsm.consumers.info(STREAMS.candidates, candidateConsumer(scope))).num_ack_pending === 0 ? true : undefined,
      );
    } finally {
      await oneCommit.close({ deadlineMs: 1_000 });
    }
  });

  it("applies nothing a read sent behind a refused accepted, and stops a read still running", async () => {
    // The run ends between the grant and `accepted`: the gateway refuses it (run_terminated).
    onNextGrant = async (assignmentId) => {
      const runId = (await gw.api("GET", `/v1/assignments/${assignmentId}`)).run_id;
      await gw.api("POST", `/v1/runs/${runId}:cancel`);
    };
    handle = async () => ({ tasks: ["never sent"] });
    const quick = await call();
    await until("refused locally", async () => ((await runner.assignment(quick.assignmentId))?.phase === "refused" ? true : undefined));

    let stopped: unknown;
    onNextGrant = async (assignmentId) => {
      const runId = (await gw.api("GET", `/v1/assignments/${assignmentId}`)).run_id;
      await gw.api("POST", `/v1/runs/${runId}:cancel`);
    };
    // (The run's cancel message can reach the runner before the handler starts: its signal is then already aborted.)
    handle = (ctx) =>
      new Promise((_resolve, reject) => {
        const stop = () => {
          stopped = ctx.signal.reason;
          reject(ctx.signal.reason);
        };
        if (ctx.signal.aborted) stop();
        else ctx.signal.addEventListener("abort", stop);
      });
    const slow = await call();
    await until("the running read stopped", () => (stopped ? true : undefined));
    expect(stopped).toBeInstanceOf(CancelRequested);
    await until("refused locally", async () => ((await runner.assignment(slow.assignmentId))?.phase === "refused" ? true : undefined));

    for (const { assignmentId } of [quick, slow]) {
      const a = await gw.api("GET", `/v1/assignments/${assignmentId}`);
      expect([a.state, a.progress]).toEqual(["revoked", []]);
    }
    // What the quick read saved behind its `accepted` still left, and every saved receipt got its answer.
    const saved = await until("every receipt answered", async () => {
      const receipts = (await runner.assignment(quick.assignmentId))?.receipts ?? [];
      return receipts.length > 1 && receipts.every((r) => r.answer) ? receipts : undefined;
    });
    expect(saved.map((r) => [r.kind, r.answer?.status === "recorded"])).toEqual([
      ["accepted", false],
      ["completed", false],
    ]);
  });

  /**
   * A read refused while what it saved behind `accepted` was on its way, its process gone before those
   * receipts were answered: the claim is over (`refused`), and the next process on the same store
   * still sends them until answered, as it does every saved receipt.
   */
  it("resends, after a restart, what a refused read saved behind its accepted, and records the answers", async () => {
    const scope = `${SCOPE}-restart`;
    const executorId = `${EXECUTOR}-restart`;
    const { sessionId } = await publishTasksAgent(gw, scopedTasksAgent(scope, executorId));
    const path = join(dir, "restarted.db");
    const start = (store: SqliteRunnerStore, authorize: (request: { assignment_id: string }) => Promise<boolean>) =>
      ToolRunner.start({
        natsUrl: nats.url,
        executorId,
        scope,
        store,
        logger: pino({ level: process.env.TEST_RUNNER_LOG ?? "silent" }),
        ...FAST_RUNNER_TIMING,
        authorize,
        tools: { "tasks.read": { kind: "read", bindingId: `${scope}-read`, handler: async () => ({ tasks: ["never applied"] }) } },
      });
    const first = new StalledAfterRefusal(path);
    // The run ends between the grant and `accepted`: the gateway refuses it.
    let executor = await start(first, async (request) => {
      const runId = (await gw.api("GET", `/v1/assignments/${request.assignment_id}`)).run_id;
      await gw.api("POST", `/v1/runs/${runId}:cancel`);
      return true;
    });
    const run = await gw.api("POST", `/v1/sessions/${sessionId}/runs`);
    const { assignment } = await gw.api("POST", `/v1/runs/${run.run_id}/tool-calls`, { tool_name: "tasks.read", arguments: {} });
    const id: string = assignment.assignment_id;
    await until("refused locally", () => (first.refused ? true : undefined));
    const left = (await executor.assignment(id))!;
    await executor.close({ deadlineMs: 500 });
    expect(left.phase).toBe("refused");
    expect(left.receipts.map((r) => [r.kind, r.answer !== undefined])).toEqual([
      ["accepted", true],
      ["completed", false],
    ]);

    executor = await start(new SqliteRunnerStore(path), async () => true);
    try {
      const answered = await until("every receipt answered", async () => {
        const receipts = (await executor.assignment(id))?.receipts ?? [];
        return receipts.every((r) => r.answer) ? receipts : undefined;
      });
      expect(answered.map((r) => [r.kind, r.answer?.status === "recorded"])).toEqual([
        ["accepted", false],
        ["completed", false],
      ]);
      expect((await executor.assignment(id))?.phase).toBe("refused");
      expect((await gw.api("GET", `/v1/assignments/${id}`)).state).toBe("revoked");
    } finally {
      await executor.close({ deadlineMs: 1_000 });
    }
  });

  /**
   * A read's outcome saved ahead of its confirmation leaves before it is durable, so a power failure
   * may take it from the store after it reached the gateway. A read's claim the store still holds
   * (here one confirmed before its process stopped) runs again at start-up, and the outcome of that
   * run, under an id of its own, completes the call.
   */
  it("runs again, after a restart, a read the store holds without its outcome; that outcome, under an id of its own, completes the call", async () => {
    const scope = `${SCOPE}-rerun`;
    const executorId = `${EXECUTOR}-rerun`;
    const { sessionId } = await publishTasksAgent(gw, scopedTasksAgent(scope, executorId));
    const run = await gw.api("POST", `/v1/sessions/${sessionId}/runs`);
    const { assignment } = await gw.api("POST", `/v1/runs/${run.run_id}/tool-calls`, { tool_name: "tasks.read", arguments: {} });
    const id: string = assignment.assignment_id;
    // What an earlier process left: the claim, granted over the protocol, confirmed, and no outcome.
    const earlier = new ProtocolExecutor(nc, scope, executorId, [`${scope}-read`], { register: false });
    await earlier.heartbeat();
    const { reply } = await earlier.claimWithOrder(id, (await earlier.pullFor(id)).generation);
    if (reply.status !== "granted") throw new Error(`claim refused: ${reply.code}`);
    const { grant } = reply;
    const now = Date.now();
    const accepted = buildReceipt(grant, { kind: "accepted", operation_key: grant.operation_key, argument_digest: grant.argument_digest }, now);
    expect((await earlier.post(earlier.accepted(grant, accepted.receiptId))).status).toBe("recorded");
    const path = join(dir, "rerun.db");
    const left = new SqliteRunnerStore(path);
    await left.open(executorId);
    await left.createAssignment({ assignmentId: id, generation: grant.generation, grant, phase: "accepting", createdAt: now, updatedAt: now }, [accepted]);
    await left.recordAnswer(accepted.receiptId, { status: "recorded", answeredAt: now }, transition("accepting", "confirm"));
    await left.close();
    earlier.close();

    const executor = await startTasksReadRunner({
      natsUrl: nats.url,
      scope,
      executorId,
      store: new SqliteRunnerStore(path),
      logger: pino({ level: process.env.TEST_RUNNER_LOG ?? "silent" }),
      handler: async () => ({ tasks: ["run again"] }),
    });
    try {
      const done = await until("the call completed", async () => {
        const a = await gw.api("GET", `/v1/assignments/${id}`);
        return a.state === "completed" ? a : undefined;
      });
      expect(done.context_preview.result).toEqual({ tasks: ["run again"] });
      const settled = await until("settled locally", async () => {
        const local = await executor.assignment(id);
        return local?.phase === "settled" ? local : undefined;
      });
      const outcome = settled.receipts.find((r) => r.kind === "completed")!;
      expect(outcome.receiptId).not.toBe(receiptId(grant, { kind: "completed" }));
      expect(outcome.receiptId).toMatch(new RegExp(`_g${grant.generation}_completed_r[0-9a-f]{8}_`));
      expect(outcome.answer?.status).toBe("recorded");
    } finally {
      await executor.close({ deadlineMs: 1_000 });
    }
  });
});

/**
 * One read's `ClaimExecution` with a stand-in host that records what is appended to the outbox: the
 * order of the handler, the answer to `accepted` and the saves, which no real gateway can time.
 */
describe("a read's claim execution, around the answer to its accepted", () => {
  const grant = sampleGrant({ assignment_id: "asg-resumed", tool_kind: "read", tool_name: "tasks.read" });
  const accepted = buildReceipt(grant, { kind: "accepted", operation_key: grant.operation_key, argument_digest: grant.argument_digest }, 1);
  const progress = (seq: number) => buildReceipt(grant, { kind: "progress", seq, progress: { seq } }, 1);

  function execution(handler: (ctx: ToolContext<unknown>) => Promise<unknown>, saved?: OutboxReceipt[]) {
    const appended: OutboxReceipt[] = [];
    const hurried: Grant[] = [];
    const host = {
      outbox: {
        append: async (_grant: Grant, receipt: OutboxReceipt) => void appended.push(receipt),
        sendLingering: (g: Grant) => void hurried.push(g),
      },
      logger: pino({ level: "silent" }),
      startsHandlers: () => true,
      closed: () => false,
      released: () => undefined,
    } as unknown as ExecutionHost;
    const tool = { name: "tasks.read", kind: "read", bindingId: grant.binding_id, handler } as RegisteredTool;
    const claim = new ClaimExecution(host, grant, tool, "accepting", saved);
    const answer = (status: "recorded" | "rejected") => {
      const stored = { status, answeredAt: 2 };
      return claim.answered(accepted, stored, claim.answerChange(accepted, status));
    };
    return { claim, appended, hurried, answer };
  }

  /**
   * Found in the store at start-up still `accepting` (it ran ahead before the process stopped, its
   * report saved and maybe sent), a read runs again once `accepted` is recorded, numbering its
   * reports past the saved ones: a first report, saved without an fsync, may have reached the
   * gateway and been lost here, so with none saved it starts at 2.
   */
  it("resumed, continues after the saved report, or from 2 when none is saved", async () => {
    const resumedRun = async (saved: OutboxReceipt[]) => {
      const { claim, appended, answer } = execution(async (ctx) => {
        await ctx.progress({ again: true });
        return { ok: true };
      }, saved);
      await answer("recorded");
      await claim.running;
      return appended.flatMap((r) => (r.kind === "progress" ? [Number(r.body.seq)] : []));
    };
    expect(await resumedRun([accepted, progress(1)])).toEqual([2]);
    expect(await resumedRun([accepted])).toEqual([2]);
    expect(await resumedRun([accepted, progress(1), progress(2)])).toEqual([3]);
  });

  /**
   * Its first run's outcome, saved ahead of the confirmation, may have left before it was durable and
   * been lost with the store: the outcome of the run again takes an id of its own, never the first
   * run's id with what may be another result. A read granted to this process keeps its claim's id.
   */
  it("resumed, sends its outcome under an id of its own; granted here, under the claim's", async () => {
    const outcomeId = async (saved: OutboxReceipt[] | undefined) => {
      const { claim, appended, answer } = execution(async () => ({ ok: true }), saved);
      if (saved) await answer("recorded");
      else await claim.start();
      await claim.running;
      const outcome = appended.find((r) => r.kind === "completed");
      return outcome!.receiptId;
    };
    const claimId = receiptId(grant, { kind: "completed" });
    expect(await outcomeId(undefined)).toBe(claimId);
    const [once, again] = [await outcomeId([accepted]), await outcomeId([accepted, progress(1)])];
    expect(once).toMatch(new RegExp(`^asg-resumed_g${grant.generation}_completed_r[0-9a-f]{8}_`));
    expect(new Set([claimId, once, again]).size).toBe(3);
  });

  it("sends its accepted without lingering when it returns a submission before the answer, and waits for that answer", async () => {
    const { claim, appended, hurried, answer } = execution(async (ctx) => ctx.submit({ task_ref: "job-2", status: "queued" }));
    await claim.start();
    await until("accepted hurried out", () => (hurried.length > 0 ? true : undefined));
    expect(hurried).toEqual([grant]);
    expect(appended).toEqual([]);
    await answer("rejected");
    await claim.running;
    expect(appended).toEqual([]);
  });

  it("holds no task and saves nothing for a submission returned after the gateway refused the claim", async () => {
    let release!: () => void;
    const returned = new Promise<void>((resolve) => (release = resolve));
    const { claim, appended, answer } = execution(async (ctx) => {
      await returned;
      return ctx.submit({ task_ref: "job-1", status: "queued" });
    });
    await claim.start();
    await answer("rejected");
    release();
    await claim.running;
    expect(appended).toEqual([]);
  });
});
