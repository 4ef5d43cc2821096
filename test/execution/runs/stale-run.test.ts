import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestNats, type TestNats } from "../../helpers/nats.js";
import { seedSession, startExecutionGateway, type TestGateway } from "../../helpers/execution-gateway.js";

/**
 * A gateway remembers the runs it wrote or read (a tool call's creation and its claim start from that
 * revision). Another replica ending the run leaves that memory stale: the stale run only ever starts
 * a compare-and-set, so a tool call made through the first gateway afterwards is refused all the same.
 */
describe("a run ended through another gateway", () => {
  let nats: TestNats;
  let a: TestGateway;
  let b: TestGateway;
  let sessionId: string;

  beforeAll(async () => {
    nats = await startTestNats();
    a = await startExecutionGateway(nats.url);
    b = await startExecutionGateway(nats.url);
    sessionId = await seedSession(a.gateway.store, { scope: "stale", agent: "stale-bot", tools: [{ name: "stale.read", binding_id: "b-stale" }] });
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await nats?.stop();
  });

  it("takes no more tool calls through the gateway that still remembers it active", async () => {
    const runId: string = (await a.http("POST", `/v1/sessions/${sessionId}/runs`)).body.run_id;
    const first = await a.http("POST", `/v1/runs/${runId}/tool-calls`, { tool_name: "stale.read", arguments: {} });
    expect(first.status).toBe(201);
    expect((await b.http("POST", `/v1/runs/${runId}:cancel`)).status).toBe(200);

    const late = await a.http("POST", `/v1/runs/${runId}/tool-calls`, { tool_name: "stale.read", arguments: {} });
    expect(late.status).toBe(409);
    expect(late.body.error).toMatchObject({ code: "run_terminated", message: expect.stringContaining("ended while the tool call was created") });
    expect((await a.http("GET", `/v1/runs/${runId}`)).body).toMatchObject({ state: "cancelled" });
    // Asked again, it is refused before anything is written: the gateway remembers the run ended now.
    const again = await a.http("POST", `/v1/runs/${runId}/tool-calls`, { tool_name: "stale.read", arguments: {} });
    expect(again.body.error).toMatchObject({ code: "run_terminated", message: expect.stringContaining("takes no more tool calls") });
  });
});
