import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { startTestNats, type TestNats } from "../../helpers/nats.js";
import { seedSession, startExecutionGateway, type TestGateway } from "../../helpers/execution-gateway.js";
import { ProtocolExecutor } from "../../helpers/protocol-executor.js";
import { until } from "../../helpers/until.js";

const SCOPE = "views";

/**
 * Gateway B answers claims from its views of the registry and of presence, kept current by watches:
 * a change made through gateway A (another process as far as NATS can tell) is refused by B once its
 * watch delivered it. A is closed after its change, so that B alone answers the claims that follow.
 */
describe("claims answered from a gateway's views of the registry and presence", () => {
  let nats: TestNats;
  let b: TestGateway;
  let nc: NatsConnection;
  let spy: NatsConnection;
  let sessionId: string;
  /** Reads of the registry's or the presence bucket, by anyone (B alone answers once A is closed). */
  let reads = 0;
  const executors: ProtocolExecutor[] = [];

  beforeAll(async () => {
    nats = await startTestNats();
    b = await startExecutionGateway(nats.url);
    sessionId = await seedSession(b.gateway.store, {
      scope: SCOPE,
      agent: "viewer",
      tools: [
        { name: "v.read", binding_id: "v-r" },
        { name: "v.write", binding_id: "v-w", tool_kind: "write" },
      ],
    });
    [nc, spy] = await Promise.all([connect({ servers: nats.url }), connect({ servers: nats.url })]);
    for (const bucket of ["KV_tg_executors", "KV_tg_presence"])
      for (const subject of [`$JS.API.DIRECT.GET.${bucket}`, `$JS.API.DIRECT.GET.${bucket}.>`]) spy.subscribe(subject, { callback: () => void reads++ });
    await spy.flush();
  });
  afterAll(async () => {
    for (const e of executors) e.close();
    await nc?.close();
    await spy?.close();
    await b?.close();
    await nats?.stop();
  });

  /** Starts gateway A, makes `change` through it, closes it. */
  const throughA = async (change: (a: TestGateway) => Promise<void>) => {
    const a = await startExecutionGateway(nats.url);
    try {
      await change(a);
    } finally {
      await a.close();
    }
  };
  /** An executor registered through A (both bindings) and online. */
  const onlineExecutor = async (id: string) => {
    await throughA(async (a) => {
      expect((await a.http("POST", "/v1/executors", { executor_id: id, scope: SCOPE, bindings: ["v-r", "v-w"] })).status).toBe(201);
    });
    const e = new ProtocolExecutor(nc, SCOPE, id, ["v-r", "v-w"], { register: false });
    executors.push(e);
    expect((await e.heartbeat()).status).toBe("ok");
    return e;
  };
  /** A new tool call of `tool` made through B; its assignment id. */
  const toolCall = async (tool: "v.read" | "v.write") => {
    const run = (await b.http("POST", `/v1/sessions/${sessionId}/runs`)).body.run_id;
    return (await b.http("POST", `/v1/runs/${run}/tool-calls`, { tool_name: tool, arguments: {} })).body.assignment.assignment_id as string;
  };
  /**
   * Claims new read calls through B until one is granted with neither bucket read: B's views hold the
   * executor's registration and presence (one not in a view yet is confirmed on the bucket).
   */
  const grantedFromViews = (e: ProtocolExecutor) =>
    until(
      "a claim through B granted from its views",
      async () => {
        const id = await toolCall("v.read");
        const { generation } = await e.pullFor(id);
        reads = 0;
        const reply = await e.claim(id, generation);
        await spy.flush();
        return reply.status === "granted" && reads === 0 ? true : undefined;
      },
      5_000,
    );
  /** Claims through B until the claim is refused; the refusal. */
  const refusedBy = (e: ProtocolExecutor, id: string, generation: number) =>
    until(
      "a claim through B refused",
      async () => {
        const reply = await e.claim(id, generation);
        return reply.status === "refused" ? reply : undefined;
      },
      5_000,
    );

  /**
   * An online executor granted from B's views holds a pulled call of `tool`; `change` is then made
   * through A. Returns the executor and B's refusal of that call once B's views have the change.
   */
  const refusedAfter = async (executorId: string, tool: "v.read" | "v.write", change: (a: TestGateway) => Promise<void>) => {
    const e = await onlineExecutor(executorId);
    await grantedFromViews(e);
    const id = await toolCall(tool);
    const { generation } = await e.pullFor(id);
    await throughA(change);
    return { e, refusal: await refusedBy(e, id, generation) };
  };

  it("grants a claim with neither the registry nor presence read from the bucket", async () => {
    await grantedFromViews(await onlineExecutor("v-granted"));
  });

  it("refuses a claim on a binding taken away through another gateway, once its view has the change", async () => {
    const { e, refusal } = await refusedAfter("v-narrowed", "v.write", async (a) => {
      expect((await a.http("PUT", "/v1/executors/v-narrowed/bindings", { bindings: ["v-r"] })).status).toBe(200);
    });
    expect(refusal).toMatchObject({ code: "binding_not_granted" });
    // A binding still granted is claimed as before.
    const read = await toolCall("v.read");
    expect((await e.claim(read, (await e.pullFor(read)).generation)).status).toBe("granted");
  });

  it("refuses a claim of an executor removed through another gateway, once its view has the removal", async () => {
    const { refusal } = await refusedAfter("v-removed", "v.read", async (a) => {
      expect((await a.http("DELETE", "/v1/executors/v-removed")).status).toBe(200);
    });
    expect(refusal).toMatchObject({ code: "executor_unknown" });
  });

  it("refuses a claim of an executor detached through another gateway, once its view of presence has it", async () => {
    const { refusal } = await refusedAfter("v-detached", "v.read", async (a) => {
      expect((await a.http("POST", "/v1/executors/v-detached:detach", { scope: SCOPE })).status).toBe(200);
    });
    expect(refusal).toMatchObject({ code: "executor_offline" });
  });
});
