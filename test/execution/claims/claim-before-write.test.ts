import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jetstreamManager } from "@nats-io/jetstream";
import { AssignmentRecord } from "../../../src/execution/model/records.js";
import { assignmentIdFor } from "../../../src/execution/model/ids.js";
import { ToolCallService } from "../../../src/execution/runs/tool-calls.js";
import { STREAMS } from "../../../src/streams/names.js";
import { subjects } from "../../../src/wire/subjects.js";
import { GatedStore } from "../../helpers/gated-store.js";
import { bucketStore, toolCallCreation } from "../../helpers/tool-call-creation.js";
import { until } from "../../helpers/until.js";
import { startExecutionFixture, type ExecutionFixture } from "../../helpers/execution-gateway.js";

const SCOPE = "early";

/**
 * A tool call's candidate is published beside its assignment's write, and the two land in different
 * streams, so an executor can claim before the assignment is there. Here another gateway creates the
 * call and its assignment's write is held back: the claim, made on the fixture's gateway, looks again
 * a moment later instead of refusing `not_found` (which would leave the call to a sweeper's re-offer).
 */
describe("a claim that arrives before its assignment's write", () => {
  let fx: ExecutionFixture;
  let assignments: GatedStore<AssignmentRecord>;
  let otherGateway: ToolCallService;

  beforeAll(async () => {
    fx = await startExecutionFixture({
      scope: SCOPE,
      agent: "early-bot",
      tools: [{ name: "e.read", binding_id: "b-early" }],
      executor: { id: "exec-early", start: "heartbeat" },
    });
    assignments = await bucketStore(fx.nc, GatedStore<AssignmentRecord>, "assignments", AssignmentRecord);
    otherGateway = (await toolCallCreation(fx.nc, fx.gw.gateway.store, { assignments })).service;
  });
  afterAll(async () => {
    await fx?.close();
  });

  it("is granted once the write lands", async () => {
    const runId = (await fx.gw.api("POST", `/v1/sessions/${fx.sessionId}/runs`)).run_id;
    const created = otherGateway.create(runId, { tool_name: "e.read", arguments: {}, tool_call_id: "tc-early" });
    const id = assignmentIdFor(runId, "tc-early");
    const jsm = await jetstreamManager(fx.nc);
    await until("the candidate, its assignment held back", async () =>
      (await jsm.streams.getMessage(STREAMS.candidates, { last_by_subj: subjects.candidate(SCOPE, "b-early", id) })) ? true : undefined,
    );
    const claim = fx.executor.claim(id, 0);
    // Inside the claim's second look (50 ms): its first read finds nothing.
    setTimeout(() => assignments.open(), 25);
    expect(await claim).toMatchObject({ status: "granted", grant: { assignment_id: id } });
    expect((await created).created).toBe(true);
  });
});
