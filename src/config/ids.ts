import { AgentVersionId, Id, ToolName } from "../wire/primitives.js";

/**
 * Identifiers end up as tokens of NATS KV keys and subjects (`toolsets.<toolset>.<version>`), so they
 * must not contain dots, wildcards or whitespace. A dot appears only where an id deliberately has
 * hierarchy: tool names (`tasks.read`) and agent version ids (`<agent>.<n>`).
 */
export const BindingIdSchema = Id.describe("Registered execution binding id");
export const ExecutorScopeSchema = Id.describe("Executor scope: the group of one product's executors allowed to claim a binding");
export const ToolsetIdSchema = Id.describe("Toolset id");
export const ToolsetVersionIdSchema = Id.describe("Toolset version label, chosen by the publisher; immutable once published");
export const AgentIdSchema = Id.describe("Agent id");
export const SessionIdSchema = Id.describe("Session id (assigned by the gateway)");

export const ToolNameSchema = ToolName.describe("Tool name, unique in its toolset version");

export const AgentVersionIdSchema = AgentVersionId.describe("Fixed agent version id returned on publish: <agent>.<n>");

export function agentVersionId(agent: string, n: number): string {
  return `${agent}.${n}`;
}

/** The agent of an agent version id (`support-bot.3` -> `support-bot`). */
export function agentOfVersion(agentVersion: string): string {
  return agentVersion.slice(0, agentVersion.lastIndexOf("."));
}

/** The sequence number of an agent version id (`support-bot.3` -> 3). */
export function agentVersionNumber(agentVersion: string): number {
  return Number(agentVersion.slice(agentVersion.lastIndexOf(".") + 1));
}
