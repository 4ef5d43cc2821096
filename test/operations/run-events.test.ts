import { jetstreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { STREAMS } from "../../src/streams/names.js";
import { ADMIN_KEY, startExecutionFixture, type ExecutionFixture, type TestGateway } from "../helpers/execution-gateway.js";
import type { ProtocolExecutor } from "../helpers/protocol-executor.js";
import { until } from "../helpers/until.js";
import { SseClient, type ReceivedEvent } from "../helpers/sse-client.js";

const SCOPE = "events-scope";
const auth = { authorization: `Bearer ${ADMIN_KEY}` };

describe("run event stream (SSE): a client disconnecting changes nothing, a reconnect resumes exactly", () => {
  let fx: ExecutionFixture, gw: TestGateway, nc: NatsConnection, executor: ProtocolExecutor, sessionId: string;
  beforeAll(async () => {
    fx = await startExecutionFixture({
      scope: SCOPE,
      agent: "events-agent",
      tools: [{ name: "notes.read", binding_id: "notes-read" }],
      executor: { id: "exec-events", start: "heartbeat" },
      execution: { eventHeartbeatMs: 200 },
    });
    ({ gw, nc, executor, sessionId } = fx);
  });
  afterAll(() => fx?.close());

  const eventsUrl = (runId: string, query = "") => `${gw.baseUrl}/v1/runs/${runId}/events${query}`;
  const consumersOnEvents = async () => (await (await jetstreamManager(nc)).streams.info(STREAMS.events)).state.consumer_count;
  const runEnded = (events: ReceivedEvent[]) => events.some((e) => e.data.type === "run" && e.data.state === "completed");

  it("streams events with the stream sequence as id, heartbeats, and cleans up its consumer on disconnect", async () => {
    const run = (await gw.http("POST", `/v1/sessions/${sessionId}/runs`)).body;
    const client = await SseClient.open(eventsUrl(run.run_id), auth);
    expect(client.status).toBe(200);
    await client.until("the run's first event", (e) => e.some((x) => x.data.type === "run" && x.data.state === "active"));
    const { assignment } = (await gw.http("POST", `/v1/runs/${run.run_id}/tool-calls`, { tool_name: "notes.read", arguments: {} })).body;
    const events = await client.until("the assignment's creation", (e) =>
      e.some((x) => x.data.type === "assignment" && x.data.assignment_id === assignment.assignment_id && x.data.to === "pending"),
    );
    expect(events.every((e, i) => i === 0 || e.id > events[i - 1]!.id)).toBe(true);
    expect(events.find((e) => e.data.type === "assignment")!.data).toMatchObject({
      from: null,
      to: "pending",
      tool_name: "notes.read",
      generation: 0,
      executor_id: null,
    });
    await until("a heartbeat comment", async () => (client.heartbeats > 0 ? true : undefined), 5_000);
    expect(await consumersOnEvents()).toBe(1);
    await client.close();
    await until("the reader's consumer to be deleted", async () => ((await consumersOnEvents()) === 0 ? true : undefined), 5_000);
  });

  it("completes the run while no client is connected; Last-Event-ID (and ?after=) gets exactly the missed events", async () => {
    const run = (await gw.http("POST", `/v1/sessions/${sessionId}/runs`)).body;
    const { assignment } = (await gw.http("POST", `/v1/runs/${run.run_id}/tool-calls`, { tool_name: "notes.read", arguments: {} })).body;
    const first = await SseClient.open(eventsUrl(run.run_id), auth);
    const seen = await first.until("the pending assignment", (e) => e.some((x) => x.data.type === "assignment" && x.data.to === "pending"));
    const lastSeen = seen.at(-1)!.id;
    await first.close(); // the tab is closed

    const candidate = await executor.pullFor(assignment.assignment_id);
    const reply = await executor.claim(assignment.assignment_id, candidate.generation);
    if (reply.status !== "granted") throw new Error(reply.code);
    const grant = reply.grant;
    expect((await executor.send(executor.accepted(grant))).status).toBe("recorded");
    for (const body of [
      { kind: "progress", seq: 1, progress: { page: 1 } },
      { kind: "completed", result: { full_result_marker: [] } },
    ] as const)
      expect((await executor.send(executor.receipt(grant, body))).status).toBe("recorded");
    expect((await gw.http("POST", `/v1/runs/${run.run_id}:complete`)).body.state).toBe("completed");
    expect((await gw.http("GET", `/v1/assignments/${assignment.assignment_id}`)).body.state).toBe("completed");

    const full = await SseClient.open(eventsUrl(run.run_id), auth);
    const everything = await full.until("the whole run", runEnded);
    await full.close();
    // By place, not id: the events of one message before its last carry the id before it.
    const missed = everything.slice(seen.length);
    expect(missed.map((e) => [e.data.type, e.data.to ?? e.data.state ?? e.data.seq])).toEqual([
      ["assignment", "claimed"],
      ["assignment", "running"],
      ["progress", 1],
      ["assignment", "completed"],
      ["run", "completed"],
    ]);
    expect(JSON.stringify(missed)).not.toContain("full_result_marker"); // states and progress, never the full result

    for (const resume of [
      { headers: { ...auth, "last-event-id": String(lastSeen) }, query: "" },
      { headers: auth, query: `?after=${lastSeen}` },
    ]) {
      const again = await SseClient.open(eventsUrl(run.run_id, resume.query), resume.headers);
      // An event without an id of its own has the one its connection read before it: compared without.
      const byContent = (events: typeof missed) => events.map((e) => (e.ownId ? e : { ...e, id: undefined }));
      expect(byContent(await again.until("the missed events", runEnded))).toEqual(byContent(missed));
      await again.close();
    }
  });

  it("refuses a malformed Last-Event-ID (400) and an unknown run (404)", async () => {
    const run = (await gw.http("POST", `/v1/sessions/${sessionId}/runs`)).body;
    const bad = await fetch(eventsUrl(run.run_id), { headers: { ...auth, "last-event-id": "yesterday" } });
    expect([bad.status, ((await bad.json()) as any).error.code]).toEqual([400, "validation_failed"]);
    const missing = await fetch(eventsUrl("run_does_not_exist"), { headers: auth });
    expect([missing.status, ((await missing.json()) as any).error.code]).toEqual([404, "run_not_found"]);
  });
});
