import { BindingSchema, ToolsetVersionSchema, type ToolsetVersion } from "../config/schemas.js";
import { GatewayError } from "../client/errors.js";
import { requestGateway, type GatewayTarget } from "../runner/gateway-request.js";
import type { ImportedToolset } from "./toolset.js";

/**
 * Publishes an imported toolset through the HTTP API: registers its bindings (one registered
 * already with the same scope and kind is fine; another is refused), then the toolset version,
 * which is immutable like any other (publishing the same version again is refused by the gateway).
 */
export async function publishToolset(gateway: GatewayTarget, imported: ImportedToolset): Promise<ToolsetVersion> {
  for (const binding of imported.bindings) {
    try {
      await requestGateway(gateway, "POST", "/v1/bindings", binding);
    } catch (err) {
      if (!(err instanceof GatewayError) || err.status !== 409) throw err;
      const existing = BindingSchema.parse(await requestGateway(gateway, "GET", `/v1/bindings/${encodeURIComponent(binding.binding_id)}`));
      if (existing.executor_scope !== binding.executor_scope || existing.tool_kind !== binding.tool_kind)
        throw new GatewayError(
          409,
          "binding_conflict",
          `binding '${binding.binding_id}' is registered for scope '${existing.executor_scope}' as ${existing.tool_kind}, not for '${binding.executor_scope}' as ${binding.tool_kind}: pick other names with --binding / --read-binding`,
        );
    }
  }
  const published = await requestGateway(gateway, "POST", `/v1/toolsets/${encodeURIComponent(imported.toolset)}/versions`, imported.version);
  return ToolsetVersionSchema.parse(published);
}
