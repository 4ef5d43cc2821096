import { describe, expect, it } from "vitest";
import { ASSIGNMENT_STATES } from "../../src/execution/model/assignment-states.js";
import type { AssignmentView } from "../../src/execution/runs/views.js";
import { callResult } from "../../src/mcp-server/call-result.js";
import { taskOf } from "../../src/mcp-server/task-store.js";

/** An assignment view in `state`; completed ones carry a small stored projection. */
function view(state: AssignmentView["state"], outcome: AssignmentView["outcome"] = null): AssignmentView {
  return {
    assignment_id: "asg_1",
    tool_call_id: "call_1",
    tool_name: "notes.find",
    arguments: {},
    state,
    context_preview:
      state === "completed"
        ? { max_result_context_bytes: 16_384, original_bytes: 12, retained_bytes: 12, truncated: false, result: { ok: true }, projection_version: 1 }
        : null,
    outcome,
    compensated_by: null,
    task: null,
    created_at: 1_000,
    run_id: "run_mcp_1",
    binding_id: "b",
    tool_kind: "write",
    argument_digest: "d",
    operation_key: "k",
    generation: 0,
    executor_id: null,
    lease_expires_at: null,
    accepted_receipt_id: null,
    final_receipt_id: null,
    progress: [],
    compensates: null,
    task_cancel: null,
    settled_by: null,
    updated_at: 2_000,
  };
}

describe("the MCP answer of a settled tool call", () => {
  it("is a success only for completed: every other state is isError, and a task reports it as failed or cancelled", () => {
    for (const state of ASSIGNMENT_STATES) {
      const result = callResult(view(state));
      expect(result.isError === true, state).toBe(state !== "completed");
      const status = taskOf(view(state)).status;
      if (state === "completed") expect(status).toBe("completed");
      else if (["pending", "claimed", "running", "submitted"].includes(state)) expect(status, state).toBe("working");
      else expect(status, state).toBe(state === "cancelled" ? "cancelled" : "failed");
    }
  });

  it("names the outcome's code for failed and reconciliation_required, the reason for cancelled", () => {
    const unknown = callResult(view("reconciliation_required", { kind: "reconciliation_required", error: { code: "executor_detached", message: "gone" } }));
    expect(JSON.parse((unknown.content[0] as { text: string }).text).error).toMatchObject({
      code: "executor_detached",
      details: { state: "reconciliation_required" },
    });
    const cancelled = callResult(view("cancelled", { kind: "cancelled", reason: "stopped" }));
    expect(JSON.parse((cancelled.content[0] as { text: string }).text).error).toMatchObject({ code: "cancelled", message: "stopped" });
  });
});
