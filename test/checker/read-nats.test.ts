import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readHistory } from "../../src/checker/index.js";
import { WatchEntry } from "../../src/execution/model/records.js";
import { executionStores } from "../../src/kv/buckets.js";
import { completeToolCall, startExecutionFixture, type ExecutionFixture } from "../helpers/execution-gateway.js";
import { watchKey } from "../helpers/watches.js";

/**
 * Reading the stored history (`toolgate check-history`) from the streams themselves. A settled
 * call's watch is erased from the assignments bucket (store layout 6), so that stream's last
 * sequences can hold no message: the read ends there instead of waiting for them.
 */
describe("reading the stored history", () => {
  let fx: ExecutionFixture;
  beforeAll(async () => {
    fx = await startExecutionFixture({
      scope: "history-read",
      agent: "reader-bot",
      tools: [{ name: "tasks.read", binding_id: "b-history" }],
      executor: { id: "exec-history", start: "heartbeat" },
    });
  });
  afterAll(async () => {
    await fx?.close();
  });

  it("ends at a stream whose last messages were purged, with every record before them", async () => {
    const runId: string = (await fx.gw.api("POST", `/v1/sessions/${fx.sessionId}/runs`)).run_id;
    const id = await completeToolCall(fx.gw, fx.executor, runId, "tasks.read", { ok: true });
    // A watch written and erased last: the stream's last sequence holds no message.
    const watches = await (await executionStores(fx.nc))("assignments", WatchEntry);
    await watches.put(watchKey("asg_erased_last"), { assignment_id: "asg_erased_last", due_at: 0 });
    await watches.erase(watchKey("asg_erased_last"));

    // Waiting for them, the read would give up after 30 s of silence, three times over.
    const history = await readHistory(fx.nc);
    expect(history.assignments.map((a) => a.value.assignment_id)).toEqual([id]);
  });
});
