import type { z } from "zod";
import { UsageReportSchema } from "../context/usage-report.js";
import { ContextWindowSchema } from "../context/window.js";
import { AgentVersionListSchema, BindingListSchema, SessionListSchema, ToolsetVersionListSchema } from "../config/routes.js";
import {
  AgentVersionSchema,
  BindingSchema,
  CreateSessionSchema,
  PublishAgentVersionSchema,
  PublishToolsetVersionSchema,
  SessionSchema,
  ToolsetVersionSchema,
} from "../config/schemas.js";
import { DryRunRequestSchema, DryRunResponseSchema } from "../dryrun/schemas.js";
import {
  CancelTaskSchema,
  CompensationResultSchema,
  DetachExecutorSchema,
  DetachResultSchema,
  ReconcileSchema,
  RunEventSchema,
} from "../execution/http/operation-routes.js";
import { AssignmentSchema, CreateToolCallResultSchema, CreateToolCallSchema, RunHistorySchema, RunSchema, RunTasksSchema } from "../execution/http/routes.js";

/** One HTTP operation as the client calls it: the server's own route declaration's method, path and schemas. */
export interface Operation {
  method: "GET" | "POST" | "PUT" | "DELETE";
  path: string;
  body?: z.ZodType;
  response: z.ZodType;
}

/**
 * The operations `toolgate/client` calls, keyed by the routes' operation ids. The schemas are the very
 * objects the gateway's routes declare (a test compares them with the served routes), so the client's
 * request and response types are inferred from the server's declarations, never written twice.
 */
export const operations = {
  createBinding: { method: "POST", path: "/v1/bindings", body: BindingSchema, response: BindingSchema },
  listBindings: { method: "GET", path: "/v1/bindings", response: BindingListSchema },
  getBinding: { method: "GET", path: "/v1/bindings/{binding_id}", response: BindingSchema },
  publishToolsetVersion: { method: "POST", path: "/v1/toolsets/{toolset}/versions", body: PublishToolsetVersionSchema, response: ToolsetVersionSchema },
  getToolsetVersion: { method: "GET", path: "/v1/toolsets/{toolset}/versions/{version}", response: ToolsetVersionSchema },
  listToolsetVersions: { method: "GET", path: "/v1/toolsets/{toolset}/versions", response: ToolsetVersionListSchema },
  publishAgentVersion: { method: "POST", path: "/v1/agents/{agent}/versions", body: PublishAgentVersionSchema, response: AgentVersionSchema },
  getAgentVersion: { method: "GET", path: "/v1/agent-versions/{agent_version}", response: AgentVersionSchema },
  listAgentVersions: { method: "GET", path: "/v1/agents/{agent}/versions", response: AgentVersionListSchema },
  createSession: { method: "POST", path: "/v1/sessions", body: CreateSessionSchema, response: SessionSchema },
  getSession: { method: "GET", path: "/v1/sessions/{session_id}", response: SessionSchema },
  listSessions: { method: "GET", path: "/v1/sessions", response: SessionListSchema },
  createRun: { method: "POST", path: "/v1/sessions/{session_id}/runs", response: RunSchema },
  getRun: { method: "GET", path: "/v1/runs/{run_id}", response: RunSchema },
  createToolCall: { method: "POST", path: "/v1/runs/{run_id}/tool-calls", body: CreateToolCallSchema, response: CreateToolCallResultSchema },
  getAssignment: { method: "GET", path: "/v1/assignments/{assignment_id}", response: AssignmentSchema },
  getRunHistory: { method: "GET", path: "/v1/runs/{run_id}/history", response: RunHistorySchema },
  getRunTasks: { method: "GET", path: "/v1/runs/{run_id}/tasks", response: RunTasksSchema },
  getRunEvents: { method: "GET", path: "/v1/runs/{run_id}/events", response: RunEventSchema },
  completeRun: { method: "POST", path: "/v1/runs/{run_id}:complete", response: RunSchema },
  cancelRun: { method: "POST", path: "/v1/runs/{run_id}:cancel", response: RunSchema },
  cancelTask: { method: "POST", path: "/v1/assignments/{assignment_id}:cancel-task", body: CancelTaskSchema, response: AssignmentSchema },
  compensate: { method: "POST", path: "/v1/assignments/{assignment_id}:compensate", response: CompensationResultSchema },
  reconcileAssignment: { method: "POST", path: "/v1/assignments/{assignment_id}:reconcile", body: ReconcileSchema, response: AssignmentSchema },
  detachExecutor: { method: "POST", path: "/v1/executors/{executor_id}:detach", body: DetachExecutorSchema, response: DetachResultSchema },
  reportUsage: { method: "POST", path: "/v1/runs/{run_id}/usage", body: UsageReportSchema, response: ContextWindowSchema },
  getRunContext: { method: "GET", path: "/v1/runs/{run_id}/context", response: ContextWindowSchema },
  dryRunTool: { method: "POST", path: "/v1/tools/dry-run", body: DryRunRequestSchema, response: DryRunResponseSchema },
} as const satisfies Record<string, Operation>;

export type OperationId = keyof typeof operations;
type BodySchemaOf<K extends OperationId> = (typeof operations)[K] extends { body: infer B extends z.ZodType } ? B : never;
/** What the caller sends to operation `K` (defaults may be left out). */
export type RequestBody<K extends OperationId> = z.input<BodySchemaOf<K>>;
/** What operation `K` answers. */
export type ResponseBody<K extends OperationId> = z.output<(typeof operations)[K]["response"]>;
