import { z } from "zod";
import { defineRoute, type RouteDef } from "../http/route.js";
import { Id } from "../wire/primitives.js";
import type { ContextWindows } from "./context-windows.js";
import { UsageReportSchema } from "./usage-report.js";
import { ContextWindowSchema } from "./window.js";

const RunParams = z.object({ run_id: Id });

/** The context window API (docs/protocol.md section 5): usage reports in, the compaction decision out. */
export function contextRoutes(windows: ContextWindows, runAgent: (runId: string) => Promise<string | undefined>): RouteDef[] {
  return [
    defineRoute({
      id: "reportUsage",
      method: "POST",
      path: "/v1/runs/{run_id}/usage",
      summary: "Report a model call's billed input tokens and prompt text bytes: calibrates the agent version's bytes-per-token ratio",
      tags: ["runtime"],
      permissions: ["runtime:write"],
      errors: ["run_not_found", "agent_version_missing"],
      params: RunParams,
      body: UsageReportSchema,
      response: ContextWindowSchema,
      agentScope: ({ params }) => runAgent(params.run_id),
      handler: ({ params, body }) => windows.report(params.run_id, body),
    }),
    defineRoute({
      id: "getRunContext",
      method: "GET",
      path: "/v1/runs/{run_id}/context",
      summary: "The run's context size in bytes and estimated tokens, and whether the next request must be compacted",
      tags: ["runtime"],
      permissions: ["runtime:read"],
      errors: ["run_not_found", "agent_version_missing"],
      params: RunParams,
      response: ContextWindowSchema,
      agentScope: ({ params }) => runAgent(params.run_id),
      handler: ({ params }) => windows.view(params.run_id),
    }),
  ];
}
