import { describe, expect, expectTypeOf, it } from "vitest";
import { ModelTools } from "../../src/client/index.js";
import { ToolNameSchema } from "../../src/config/ids.js";
import type { ToolDefinition } from "../../src/config/schemas.js";
import type { OperatorOutcome } from "../../src/execution/operations/operator-settle.js";
import { mapTools } from "../../src/mcp-executor/index.js";
import type { ReconcileOutcome, ToolDefinition as RunnerTool, ToolContext } from "../../src/runner/index.js";
import { buildReceipt, type ReceiptContent } from "../../src/runner/receipts.js";
import { progressIdPlace, receiptId } from "../../src/wire/receipt-ids.js";
import { Candidate, Grant, Receipt, TaskSubmission } from "../../src/wire/messages.js";
import { ErrorBody, Id, Reason, TOOL_NAME_MAX_LENGTH, ToolKind } from "../../src/wire/primitives.js";

/**
 * Where the ToolRunner and the gateway each hold a view of one shape, the two must agree: these
 * fail when one side's limit or kinds move without the other's. The type checks fail `npm run
 * typecheck`; the others fail here.
 */

const grant: Grant = {
  assignment_id: "asg_shapes",
  run_id: "run_shapes",
  session_id: "s1",
  executor_id: "exec-1",
  tool_name: "tasks.read",
  binding_id: "b-read",
  tool_kind: "read",
  arguments: {},
  argument_digest: "0".repeat(64),
  subject: "user-1",
  agent: "bot",
  agent_version: "bot.1",
  toolset: "tasks",
  toolset_version: "v1",
  operation_key: "run_shapes/asg_shapes",
  claim_token: "t".repeat(43),
  generation: 0,
  lease_expires_at: 0,
};

describe("one tool name limit", () => {
  const longest = `${"a".repeat(TOOL_NAME_MAX_LENGTH - ".read".length)}.read`;
  const tooLong = `a${longest}`;

  it("configuration, the candidate and the grant take a name of the limit and refuse one longer", () => {
    for (const schema of [ToolNameSchema, Candidate.shape.tool_name, Grant.shape.tool_name]) {
      expect(schema.safeParse(longest).success).toBe(true);
      expect(schema.safeParse(tooLong).success).toBe(false);
    }
    expect(Grant.safeParse({ ...grant, tool_name: tooLong }).success).toBe(false);
  });

  it("is a length model APIs take for a function name", () => {
    const name = "a".repeat(TOOL_NAME_MAX_LENGTH);
    const tool: ToolDefinition = {
      name,
      description: "d",
      binding_id: "b",
      input_schema: { type: "object" },
      output_schema: { type: "object" },
      max_result_context_bytes: 16_384,
    };
    expect(new ModelTools([tool]).openai()[0]!.function.name).toBe(name);
  });

  it("bounds the MCP executor's mapped names", () => {
    const mcpTool = (name: string) => ({ name, inputSchema: { type: "object" as const } });
    expect(mapTools([mcpTool(longest)], { binding: "b" }).tools[0]!.name).toBe(longest);
    expect(() => mapTools([mcpTool(tooLong)], { binding: "b" })).toThrow(`at most ${TOOL_NAME_MAX_LENGTH} characters`);
  });
});

describe("the runner's receipts and the wire's bounds", () => {
  const long = "x".repeat(10_000);

  it("clips an error code and message, and a reason, to exactly what the wire's receipt takes", () => {
    const sent = (content: ReceiptContent) => Receipt.parse({ ...buildReceipt(grant, content, 0).body, claim_token: grant.claim_token });
    for (const kind of ["refused", "failed", "reconciliation_required"] as const) {
      const receipt = sent({ kind, error: { code: long, message: long } });
      const error = "error" in receipt ? receipt.error : undefined;
      expect([error?.code.length, error?.message.length]).toEqual([ErrorBody.shape.code.maxLength, ErrorBody.shape.message.maxLength]);
    }
    const cancelled = sent({ kind: "cancelled", reason: long });
    expect("reason" in cancelled ? cancelled.reason.length : undefined).toBe(Reason.maxLength);
  });

  it("makes receipt ids the wire takes as ids, however long the assignment id", () => {
    for (const assignment_id of ["a", "a".repeat(60), "a".repeat(128)]) {
      for (const kind of Receipt.options.map((o) => o.shape.kind.value))
        expect(Id.safeParse(receiptId({ ...grant, assignment_id }, { kind, seq: 1 })).success, `${kind} of ${assignment_id.length}`).toBe(true);
    }
  });

  it("reads the assignment and seq back from a progress id of the readable form, and from no other", () => {
    for (const [assignment_id, generation, seq] of [
      ["asg_x_g1_p2", 0, 1],
      ["a-b_c", 12, 340],
    ] as const) {
      const id = receiptId({ ...grant, assignment_id, generation }, { kind: "progress", seq });
      expect(progressIdPlace(id)).toEqual({ assignment_id, seq });
    }
    expect(progressIdPlace(receiptId(grant, { kind: "completed" }))).toBeNull();
    expect(progressIdPlace(receiptId({ ...grant, assignment_id: "a".repeat(100) }, { kind: "progress", seq: 1 }))).toBeNull(); // the long form
    expect(progressIdPlace("rc-free-form")).toBeNull();
    expect(progressIdPlace(`a_g01_p1_${"A".repeat(22)}`)).toBeNull();
    expect(progressIdPlace(`a_g1_p${"9".repeat(20)}_${"A".repeat(22)}`)).toBeNull(); // beyond a safe integer
  });

  it("speaks every receipt kind of the wire, and no other (types)", () => {
    expectTypeOf<ReceiptContent["kind"]>().toEqualTypeOf<Receipt["kind"]>();
  });
});

describe("the runner's and the gateway's views of a tool and a settlement", () => {
  it("a tool's kind is the wire's (types)", () => {
    expectTypeOf<RunnerTool["kind"]>().toEqualTypeOf<ToolKind>();
  });

  it("a submission is the wire's task submission (types)", () => {
    expectTypeOf<Parameters<ToolContext["submit"]>[0]>().toEqualTypeOf<TaskSubmission>();
  });

  /** The runner's `reconcile` and the operator's reconcile route settle the same assignments; the runner spells its outcome its own way (`kind`, a flat error). */
  it("the runner's reconcile settles with the outcomes an operator's settlement has (types)", () => {
    expectTypeOf<ReconcileOutcome["kind"]>().toEqualTypeOf<OperatorOutcome["outcome"]>();
    expectTypeOf<Omit<Extract<ReconcileOutcome, { kind: "failed" }>, "kind">>().toEqualTypeOf<Extract<OperatorOutcome, { outcome: "failed" }>["error"]>();
  });
});
