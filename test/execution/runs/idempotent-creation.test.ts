import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jetstreamManager } from "@nats-io/jetstream";
import { STREAMS } from "../../../src/streams/names.js";
import { subjects } from "../../../src/wire/subjects.js";
import { DirectReads } from "../../helpers/direct-reads.js";
import { storedOn } from "../../helpers/nats.js";
import { startExecutionFixture, type ExecutionFixture } from "../../helpers/execution-gateway.js";

const SCOPE = "idem";
const BINDING = "b-idem";

/**
 * A tool call created under a `tool_call_id` (the idempotency key an agent platform passes on every
 * call): its first request reads nothing before writing (its creation watch is written create-only,
 * and only an earlier request for the same call can have written it); the same request again is
 * answered with the stored call, never dispatched a second time.
 */
describe("a tool call created under its tool_call_id", () => {
  let fx: ExecutionFixture;
  let assignmentReads: DirectReads;

  beforeAll(async () => {
    fx = await startExecutionFixture({
      scope: SCOPE,
      agent: "idem-bot",
      tools: [{ name: "i.read", binding_id: BINDING }],
      executor: { id: "exec-idem", start: "heartbeat" },
    });
    assignmentReads = await DirectReads.of(fx.nats.url, "tg_assignments");
  });
  afterAll(async () => {
    await assignmentReads?.close();
    await fx?.close();
  });

  const newRun = async (): Promise<string> => (await fx.gw.api("POST", `/v1/sessions/${fx.sessionId}/runs`)).run_id;
  const create = (runId: string, toolCallId: string) =>
    assignmentReads.during(() => fx.gw.http("POST", `/v1/runs/${runId}/tool-calls`, { tool_name: "i.read", arguments: { q: 1 }, tool_call_id: toolCallId }));
  /** Candidates the stream holds for the call (taken ones are gone from the work queue). */
  const candidatesOf = async (id: string): Promise<number> =>
    storedOn(await jetstreamManager(fx.nc), STREAMS.candidates, subjects.candidate(SCOPE, BINDING, id));

  it("reads nothing the first time, and replays the stored call the next, without offering it again", async () => {
    const runId = await newRun();
    const first = await create(runId, "tc-1");
    expect(first.value.status).toBe(201);
    expect(first.value.body.created).toBe(true);
    expect(first.reads).toBe(0);
    const id: string = first.value.body.assignment.assignment_id;
    expect(await candidatesOf(id)).toBe(1);

    const again = await create(runId, "tc-1");
    expect(again.value.body).toMatchObject({ created: false, assignment: { assignment_id: id, state: "pending" } });
    expect(await candidatesOf(id)).toBe(1);
    expect((await fx.gw.api("GET", `/v1/runs/${runId}`)).assignment_ids).toEqual([id]);
  });

  it("replays a settled call as it settled, and its executor is never granted it again", async () => {
    const runId = await newRun();
    const id: string = (await create(runId, "tc-2")).value.body.assignment.assignment_id;
    const reply = await fx.executor.claim(id, (await fx.executor.pullFor(id)).generation);
    if (reply.status !== "granted") throw new Error(`claim refused: ${reply.code}`);
    expect((await fx.executor.send(fx.executor.accepted(reply.grant))).status).toBe("recorded");
    expect((await fx.executor.send(fx.executor.receipt(reply.grant, { kind: "completed", result: { n: 2 } }))).status).toBe("recorded");

    const again = await create(runId, "tc-2");
    expect(again.value.body).toMatchObject({ created: false, assignment: { assignment_id: id, state: "completed" } });
    // Whatever was offered with the replay (a first offer, which the stream drops as its earlier
    // copy within its de-duplication window) is no grant: the call is settled.
    expect(await fx.executor.claim(id, 0)).toMatchObject({ status: "refused" });
    expect((await fx.gw.api("GET", `/v1/runs/${runId}`)).assignment_ids).toEqual([id]);
  });

  it("answers a request for the same tool_call_id with other arguments with 409 idempotency_conflict", async () => {
    const runId = await newRun();
    await create(runId, "tc-3");
    const other = await fx.gw.http("POST", `/v1/runs/${runId}/tool-calls`, { tool_name: "i.read", arguments: { q: 2 }, tool_call_id: "tc-3" });
    expect(other.status).toBe(409);
    expect(other.body.error.code).toBe("idempotency_conflict");
  });
});
