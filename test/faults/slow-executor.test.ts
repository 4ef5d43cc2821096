import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readHistory } from "../../src/checker/index.js";
import { startTestNats, type TestNats } from "../helpers/nats.js";
import { FAULT_WAIT_MS, FaultRig, READ_BINDING, SCOPE, WRITE_BINDING, size } from "./rig.js";
import { until } from "../helpers/until.js";

const CYCLES = size(1, 5);
const CLI = fileURLToPath(new URL("../../src/cli/run.ts", import.meta.url));

describe("a slow executor (SIGSTOP) loses its lease; after SIGCONT its receipts are refused or late", () => {
  let nats: TestNats;
  let rig: FaultRig;
  let nc: NatsConnection;

  beforeAll(async () => {
    nats = await startTestNats();
    rig = new FaultRig(() => nats.url);
    await rig.startGateway();
    await rig.seed();
    nc = await connect({ servers: nats.url });
  });
  afterAll(async () => {
    await nc?.close();
    await rig?.close();
    await nats?.stop();
  });

  /** The gateway's stored answer to an executor's receipt of `kind` for a call, once processed (receipt ids are unguessable: found through the index). */
  const answered = (executorId: string, assignmentId: string, kind: string) =>
    until(
      `${kind} of ${assignmentId} by ${executorId} processed`,
      async () => (await readHistory(nc)).index.find((e) => e.executor_id === executorId && e.assignment_id === assignmentId && e.kind === kind),
      FAULT_WAIT_MS,
    );

  const stalled = (lines: string[], point: string) =>
    until(`an executor stopped at ${point}`, () => lines.map((l) => l.split(" ")).find((w) => w[0] === "stalled" && w[1] === point)?.[2], FAULT_WAIT_MS);

  it(
    `${CYCLES} cycle(s): the lease expires and another executor does the work; a stopped handler's run is cancelled`,
    async () => {
      const started = Date.now();
      for (let c = 0; c < CYCLES; c++) {
        const spec = (id: string, stall?: string) => ({
          executorId: `${id}-${c}`,
          scope: SCOPE,
          binding: WRITE_BINDING,
          readBinding: READ_BINDING,
          env: stall ? { TOOLGATE_STALL_POINT: stall } : ({} as Record<string, string>),
        });
        // 1. Alone, the slow executor claims, saves and stops before sending `accepted`.
        const slow = rig.startExecutor(spec("slow", "after_persist,mid_handler"));
        const run = await rig.api("POST", `/v1/sessions/${rig.sessionId}/runs`);
        const { assignment } = await rig.api("POST", `/v1/runs/${run.run_id}/tool-calls`, {
          tool_name: "tasks.create",
          arguments: { title: `slow ${c}` },
          tool_call_id: "lease",
        });
        expect(await stalled(slow.lines, "after_persist")).toBe(assignment.assignment_id);
        // 2. Its lease expires; a healthy executor claims the next generation and completes it.
        const fast = rig.startExecutor(spec("fast"));
        const done = await until(
          "the call completed by the other executor",
          async () => {
            const a = await rig.api("GET", `/v1/assignments/${assignment.assignment_id}`);
            return a.state === "completed" ? a : undefined;
          },
          FAULT_WAIT_MS,
        );
        expect(done).toMatchObject({ executor_id: `fast-${c}`, generation: 1 });
        // 3. Woken, the slow executor sends its old `accepted`: refused, so its handler never runs.
        slow.proc.kill("SIGCONT");
        expect(await answered(`slow-${c}`, assignment.assignment_id, "accepted")).toMatchObject({ status: "rejected", code: "lease_expired" });
        await rig.pool.stop([fast]);

        // 4. Now the slow executor alone takes a call and stops inside the handler, after its side effect.
        const second = await rig.api("POST", `/v1/runs/${run.run_id}/tool-calls`, {
          tool_name: "tasks.create",
          arguments: { title: `stuck ${c}` },
          tool_call_id: "stuck",
        });
        const id = second.assignment.assignment_id;
        expect(await stalled(slow.lines, "mid_handler")).toBe(id);
        await rig.api("POST", `/v1/runs/${run.run_id}:cancel`);
        expect((await rig.api("GET", `/v1/assignments/${id}`)).state).toBe("abandoned");
        // 5. Woken, it reports: the run is over, so its progress and result are kept for audit and change nothing.
        slow.proc.kill("SIGCONT");
        expect(await answered(`slow-${c}`, id, "completed")).toMatchObject({ status: "late_ignored", code: "run_terminated" });
        expect((await rig.api("GET", `/v1/assignments/${id}`)).state).toBe("abandoned");
        await rig.pool.stop([slow]);
      }
      const report = await rig.check();
      console.log(`slow executor: ${rig.summary(report)}, cycles ${CYCLES}, ${Date.now() - started} ms`);
      expect(report.violations).toEqual([]);
      expect(report.counts.side_effects).toBe(2 * CYCLES);
      // The same verdict from the CLI, with the executors' files.
      const files = rig.pool.executors.flatMap((e) => ["--ledger", e.ledger, "--outbox", e.store]);
      const cli = spawnSync(process.execPath, ["--import", "tsx", CLI, "check-history", "--json", "--server", nats.url, ...files], { encoding: "utf8" });
      expect(cli.status).toBe(0);
      expect(JSON.parse(cli.stdout)).toMatchObject({ ok: true, violations: [], counts: { side_effects: 2 * CYCLES } });
    },
    size(90_000, 300_000),
  );
});
