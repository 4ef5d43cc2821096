/**
 * Key layout of the `tg_config` bucket. One key per immutable object; a key's dots are hierarchy:
 *   bindings.<binding_id>
 *   toolsets.<toolset>.<version>
 *   agents.<agent>.<n>            (the agent version id <agent>.<n>)
 *   sessions.<session_id>
 *   legacy.<one of the above>     pre-upgrade objects, read only by `toolgate migrate --stored`
 */
export const LEGACY_PREFIX = "legacy.";

export const configKeys = {
  binding: (bindingId: string) => `bindings.${bindingId}`,
  bindings: () => "bindings.*",
  toolsetVersion: (toolset: string, version: string) => `toolsets.${toolset}.${version}`,
  toolsetVersions: (toolset: string) => `toolsets.${toolset}.*`,
  agentVersion: (agentVersion: string) => `agents.${agentVersion}`,
  agentVersions: (agent: string) => `agents.${agent}.*`,
  session: (sessionId: string) => `sessions.${sessionId}`,
  sessions: () => "sessions.*",
};
