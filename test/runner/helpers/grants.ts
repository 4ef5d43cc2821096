import { argumentDigest } from "../../../src/wire/digest.js";
import type { Grant } from "../../../src/wire/messages.js";

/** A well-formed grant for unit tests (digest computed over its arguments). */
export function sampleGrant(overrides: Partial<Grant> = {}): Grant {
  const args = overrides.arguments ?? { title: "write the report" };
  return {
    assignment_id: "asg-1",
    run_id: "run-1",
    session_id: "ses-1",
    executor_id: "exec-1",
    tool_name: "tasks.create",
    binding_id: "binding-tasks",
    tool_kind: "write",
    arguments: args,
    argument_digest: argumentDigest(args),
    subject: "user-42",
    agent: "agent-1",
    agent_version: "agv-1",
    toolset: "ts-1",
    toolset_version: "tsv-1",
    operation_key: "op-1",
    claim_token: "c".repeat(40),
    generation: 0,
    lease_expires_at: 1_000,
    ...overrides,
  };
}
