import type { Grant } from "../../src/wire/messages.js";
import { receiptId } from "../../src/wire/receipt-ids.js";
import type { TestGateway } from "./execution-gateway.js";
import type { ProtocolExecutor } from "./protocol-executor.js";

/**
 * A new tool call of `toolName` in a new run of the session, claimed by `exec` and confirmed (its
 * `accepted` recorded): the claim's grant, and whether the claim reply said the gateway keeps
 * receipts sent ahead in order.
 */
export async function runningCall(
  gw: TestGateway,
  exec: ProtocolExecutor,
  sessionId: string,
  toolName: string,
): Promise<{ runId: string; grant: Grant; ordersReceipts: boolean }> {
  const run = await gw.api("POST", `/v1/sessions/${sessionId}/runs`);
  const call = await gw.api("POST", `/v1/runs/${run.run_id}/tool-calls`, { tool_name: toolName, arguments: {} });
  const id: string = call.assignment.assignment_id;
  const { reply, ordersReceipts } = await exec.claimWithOrder(id, (await exec.pullFor(id)).generation);
  if (reply.status !== "granted") throw new Error(`claim refused: ${reply.code}`);
  const accepted = await exec.post(exec.accepted(reply.grant, receiptId(reply.grant, { kind: "accepted" })));
  if (accepted.status !== "recorded") throw new Error(`accepted not recorded: ${accepted.status} ${accepted.code ?? ""}`);
  return { runId: run.run_id, grant: reply.grant, ordersReceipts };
}
