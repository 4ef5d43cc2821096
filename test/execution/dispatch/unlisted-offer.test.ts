import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jetstreamManager } from "@nats-io/jetstream";
import { RunRecord } from "../../../src/execution/model/records.js";
import { assignmentIdFor } from "../../../src/execution/model/ids.js";
import { ToolCallService } from "../../../src/execution/runs/tool-calls.js";
import { STREAMS } from "../../../src/streams/names.js";
import { subjects } from "../../../src/wire/subjects.js";
import { bucketStore, toolCallCreation } from "../../helpers/tool-call-creation.js";
import { until } from "../../helpers/until.js";
import { DyingStore } from "../../helpers/dying-store.js";
import { startExecutionFixture, startExecutionGateway, type ExecutionFixture } from "../../helpers/execution-gateway.js";

const SCOPE = "unlisted";

/**
 * A tool call's creation lists the call on its run and offers its candidate at once. A creation that
 * died in between leaves a call offered but not listed: a claim lists it first, so the run's end,
 * which settles exactly the calls listed, reaches every call ever granted; a run that ended first
 * takes no claim of it, and the call is withdrawn.
 */
describe("a call offered before its run lists it", () => {
  let fx: ExecutionFixture;
  let dyingCreation: ToolCallService;

  beforeAll(async () => {
    fx = await startExecutionFixture({
      scope: SCOPE,
      agent: "unlisted-bot",
      tools: [{ name: "u.read", binding_id: "b-unlisted" }],
      executor: { id: "exec-unlisted", start: "heartbeat" },
    });
    // Its process dies at its first compare-and-set of a run: a creation stops after offering its call, before listing it.
    const runs = await bucketStore(fx.nc, DyingStore<RunRecord>, "runs", RunRecord);
    dyingCreation = (await toolCallCreation(fx.nc, fx.gw.gateway.store, { runs })).service;
  });
  afterAll(async () => {
    await fx?.close();
  });

  const newRun = async (): Promise<string> => (await fx.gw.api("POST", `/v1/sessions/${fx.sessionId}/runs`)).run_id;
  const candidateOf = async (id: string) =>
    (await jetstreamManager(fx.nc)).streams.getMessage(STREAMS.candidates, { last_by_subj: subjects.candidate(SCOPE, "b-unlisted", id) });
  /** A creation that dies between offering the call and listing it: the call's id, its candidate waiting. */
  const offeredUnlisted = async (runId: string): Promise<string> => {
    const toolCallId = `tc-${runId}`;
    await expect(dyingCreation.create(runId, { tool_name: "u.read", arguments: {}, tool_call_id: toolCallId })).rejects.toThrow("the process died");
    const id = assignmentIdFor(runId, toolCallId);
    // Published beside the listing that failed: it may land just after the creation gave up.
    await until("the candidate of the call", async () => (await candidateOf(id)) ?? undefined);
    expect((await fx.gw.api<RunRecord>("GET", `/v1/runs/${runId}`)).assignment_ids).not.toContain(id);
    return id;
  };

  it("a claim lists the call on its run first, then grants it", async () => {
    const runId = await newRun();
    const id = await offeredUnlisted(runId);
    expect(await fx.executor.claim(id, 0)).toMatchObject({ status: "granted", grant: { assignment_id: id } });
    expect((await fx.gw.api<RunRecord>("GET", `/v1/runs/${runId}`)).assignment_ids).toContain(id);
  });

  it("a run whose end another gateway recorded takes no claim of it, though this gateway remembers the run open", async () => {
    const runId = await newRun();
    // This gateway makes a call of the run, so it remembers the run (open, listing that call).
    await fx.gw.api("POST", `/v1/runs/${runId}/tool-calls`, { tool_name: "u.read", arguments: {} });
    const id = await offeredUnlisted(runId);
    const other = await startExecutionGateway(fx.nats.url);
    try {
      expect((await other.http("POST", `/v1/runs/${runId}:cancel`)).status).toBe(200);
    } finally {
      await other.close();
    }
    expect(await fx.executor.claim(id, 0)).toMatchObject({ status: "refused", code: "run_terminated" });
    expect(await fx.gw.api("GET", `/v1/assignments/${id}`)).toMatchObject({ state: "withdrawn", executor_id: null });
    expect(await candidateOf(id)).toBeNull();
  });

  it("a run that ended first takes no claim of it: the call is withdrawn and its candidate taken back", async () => {
    const runId = await newRun();
    const id = await offeredUnlisted(runId);
    expect((await fx.gw.http("POST", `/v1/runs/${runId}:cancel`)).status).toBe(200);
    expect(await fx.executor.claim(id, 0)).toMatchObject({ status: "refused", code: "run_terminated" });
    expect(await fx.gw.api("GET", `/v1/assignments/${id}`)).toMatchObject({ state: "withdrawn" });
    expect(await candidateOf(id)).toBeNull();
  });
});
