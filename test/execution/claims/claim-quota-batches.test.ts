import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { Kvm } from "@nats-io/kv";
import { bucketStores } from "../../../src/kv/buckets.js";
import { ClaimQuota } from "../../../src/execution/claims/claim-quota.js";
import { AssignmentRecord, ClaimHoldings, type HeldClaim } from "../../../src/execution/model/records.js";
import { startTestNats, type TestNats } from "../../helpers/nats.js";

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** One executor's claims arriving while the quota's compare-and-set of the ones before is in flight. */
describe("a claim quota's batches", () => {
  let nats: TestNats;
  let nc: NatsConnection;

  beforeAll(async () => {
    nats = await startTestNats();
    nc = await connect({ servers: nats.url });
    const kvm = new Kvm(nc);
    for (const bucket of ["quota_holdings", "quota_assignments"]) await kvm.create(bucket, { history: 1 });
  });
  afterAll(async () => {
    await nc?.close();
    await nats?.stop();
  });

  it("start each batch after the first from the record the one before wrote, without reading it back", async () => {
    const open = await bucketStores(nc);
    const holdings = (await open("quota_holdings", ClaimHoldings)).withRevisionCache(16);
    const quota = new ClaimQuota(holdings, await open("quota_assignments", AssignmentRecord), 10);
    const current = await quota.read("s", "exec-1");
    expect(current).toBeNull();
    const reads = vi.spyOn(holdings, "get");

    const entry = (n: number): HeldClaim => ({ assignment_id: `asg_${n}`, generation: 0, reserved_at: Date.now() });
    const asked = [entry(1), entry(2), entry(3), entry(4)];
    // The first claim's batch creates the record; each later one arrives while the batch before is written.
    const reserved: Array<Promise<HeldClaim | null>> = [];
    for (const e of asked) {
      reserved.push(quota.reserve("s", "exec-1", e, current));
      await nextTurn();
    }
    expect(await Promise.all(reserved)).toEqual(asked);
    expect(reads).not.toHaveBeenCalled();
    // What the batches wrote is on the server, in order.
    const stored = await holdings.get("s.exec-1");
    expect(stored?.value.held.map((e) => e.assignment_id)).toEqual(["asg_1", "asg_2", "asg_3", "asg_4"]);
  });
});
