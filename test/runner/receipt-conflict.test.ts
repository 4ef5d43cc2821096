import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstream } from "@nats-io/jetstream";
import { createLogger } from "../../src/log/logger.js";
import { SqliteRunnerStore, ToolRunner, type LocalAssignment, type OutboxReceipt, type PhaseChange } from "../../src/runner/index.js";
import { encode } from "../../src/wire/codec.js";
import type { Receipt } from "../../src/wire/messages.js";
import { EXECUTOR_JS_API_PREFIX, subjects } from "../../src/wire/subjects.js";
import { startTestNats, type TestNats } from "../helpers/nats.js";
import { lineSink } from "../security/helpers.js";
import { publishTasksAgent, scopedTasksAgent, startTasksReadRunner } from "./helpers/tasks-agent.js";
import { startExecutionGateway, SHORT_LEASES, type TestGateway } from "../helpers/execution-gateway.js";
import { until } from "../helpers/until.js";

const SCOPE = "conflict";
const EXECUTOR = "exec-conflict";

/**
 * Another body already stored under the ToolRunner's receipt id, inside the stream's dedup window: the
 * runner's copy is dropped by the stream, its `tg.rq` (with its body's digest) is answered
 * `receipt_conflict`, which it logs at error level as the bug it is and never resends with a new body.
 * The other body comes from a store that lets a second writer of the same claim (its token, its
 * receipt id) publish first: what a store shared by two processes of one executor could do. It
 * publishes once the claim is confirmed: a read's handler runs while its `accepted` is answered, and
 * a report on a claim not yet confirmed would be refused, not recorded.
 */
class RacedStore extends SqliteRunnerStore {
  private readonly grants = new Map<string, LocalAssignment["grant"]>();
  raced = "";

  constructor(
    path: string,
    private readonly nc: NatsConnection,
    private readonly confirmed: (assignmentId: string) => Promise<void>,
    private readonly recorded: (assignmentId: string) => Promise<void>,
  ) {
    super(path);
  }

  override async createAssignment(assignment: LocalAssignment, receipts: readonly OutboxReceipt[]): Promise<void> {
    this.grants.set(assignment.assignmentId, assignment.grant);
    return super.createAssignment(assignment, receipts);
  }

  override async appendReceipt(receipt: OutboxReceipt, change?: PhaseChange): Promise<void> {
    const grant = this.grants.get(receipt.assignmentId);
    if (grant && receipt.kind === "progress" && !this.raced) {
      this.raced = receipt.receiptId;
      await this.confirmed(receipt.assignmentId);
      const other = { ...receipt.body, progress: { step: "other" }, claim_token: grant.claim_token } as Receipt;
      await jetstream(this.nc, { apiPrefix: EXECUTOR_JS_API_PREFIX }).publish(subjects.receipt(SCOPE, EXECUTOR, receipt.assignmentId), encode(other), {
        msgID: receipt.receiptId,
      });
      await this.recorded(receipt.assignmentId);
    }
    return super.appendReceipt(receipt, change);
  }
}
describe("ToolRunner: receipt_conflict", () => {
  let nats: TestNats;
  let gw: TestGateway;
  let nc: NatsConnection;
  let runner: ToolRunner;
  let dir: string;
  const sink = lineSink();

  beforeAll(async () => {
    nats = await startTestNats();
    gw = await startExecutionGateway(nats.url, SHORT_LEASES);
    nc = await connect({ servers: nats.url });
    dir = mkdtempSync(join(tmpdir(), "toolgate-conflict-"));
  });
  afterAll(async () => {
    await runner?.close({ deadlineMs: 1_000 });
    await nc?.close();
    await gw?.close();
    await nats?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("is logged at error level and the other body is never sent", async () => {
    const { sessionId } = await publishTasksAgent(gw, scopedTasksAgent(SCOPE, EXECUTOR));
    const progressOf = async (id: string) => (await gw.api("GET", `/v1/assignments/${id}`)).progress as unknown[];
    const store = new RacedStore(
      join(dir, "runner.db"),
      nc,
      (id) =>
        until("the claim confirmed", async () => ((await gw.api("GET", `/v1/assignments/${id}`)).state === "running" ? true : undefined)).then(() => undefined),
      (id) => until("the other body recorded", async () => ((await progressOf(id)).length === 1 ? true : undefined)).then(() => undefined),
    );
    runner = await startTasksReadRunner({
      natsUrl: nats.url,
      executorId: EXECUTOR,
      scope: SCOPE,
      store,
      logger: createLogger({ name: "toolgate-runner", level: "info", destination: sink.stream }),
      async handler(ctx) {
        await ctx.progress({ step: "mine" });
        return { tasks: [] };
      },
    });

    const run = await gw.api("POST", `/v1/sessions/${sessionId}/runs`);
    const { assignment } = await gw.api("POST", `/v1/runs/${run.run_id}/tool-calls`, { tool_name: "tasks.read", arguments: {} });
    const id: string = assignment.assignment_id;
    await until("the call completed", async () => ((await gw.api("GET", `/v1/assignments/${id}`)).state === "completed" ? true : undefined));

    // The final receipt may have gone out ahead of the report's answer (`Tg-After`): the report's lane
    // finds the conflict once its answer times out and it asks `tg.rq`.
    const conflictsLogged = () => sink.lines.map((l) => JSON.parse(l)).filter((l) => l.receipt_id === store.raced && l.code === "receipt_conflict");
    const conflicts = await until("the conflict logged", () => (conflictsLogged().length > 0 ? conflictsLogged() : undefined));
    expect(conflicts).toHaveLength(1);
    expect(conflicts[0]).toMatchObject({ level: 50, status: "rejected", kind: "progress" });
    // What the gateway holds is the first body; the runner's copy never reached it under another id.
    expect(await progressOf(id)).toEqual([expect.objectContaining({ seq: 1, progress: { step: "other" } })]);
  });
});
