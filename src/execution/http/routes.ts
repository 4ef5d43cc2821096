import { z } from "zod";
import { SessionIdSchema } from "../../config/ids.js";
import { defineRoute, type RouteDef } from "../../http/route.js";
import { HttpTimestamp } from "../../http/timestamp.js";
import { Id } from "../../wire/primitives.js";
import type { Execution } from "../execution.js";
import { RunEnding, RunRecord, TaskResult } from "../model/records.js";
import { ToolCallRequest } from "../runs/tool-calls.js";
import { RUN_STATES } from "../model/run-states.js";
import { viewSchemas } from "../runs/views.js";

// The stored run record is what a client reads, with its times as RFC 3339 and a description added.
const RunSchema = RunRecord.extend({
  assignment_ids: RunRecord.shape.assignment_ids.describe("Every tool call of the run, in creation order"),
  task_results: z.array(TaskResult.extend({ at: HttpTimestamp })).optional(),
  created_at: HttpTimestamp,
  ending: RunEnding.extend({ at: HttpTimestamp })
    .optional()
    .describe("Only while the run is being ended (state still active): the end asked for; it takes no more tool calls. Gone once it is completed or cancelled"),
  ended_at: HttpTimestamp.nullable(),
}).meta({ id: "Run" });

// The reader's views as answers: their times as RFC 3339.
const views = viewSchemas(HttpTimestamp);
const HistoryEntrySchema = views.HistoryEntry.meta({ id: "HistoryEntry" });
const AssignmentSchema = views.Assignment.meta({ id: "Assignment" });
const TaskResultEntrySchema = views.TaskResultEntry.meta({ id: "TaskResultEntry" });

const RunHistorySchema = z.object({
  run_id: Id,
  state: z.enum(RUN_STATES),
  tool_calls: z.array(HistoryEntrySchema),
  task_results: z.array(TaskResultEntrySchema).describe("Outcomes of background tasks, each its own entry, in arrival order (docs/async-tasks.md)"),
});
const RunTasksSchema = z.object({ run_id: Id, tasks: z.array(views.RunTask).describe("Every background task the run's tool calls submitted, in call order") });

const CreateToolCallSchema = ToolCallRequest.meta({ id: "CreateToolCall" });

const CreateToolCallResultSchema = z.object({
  created: z.boolean().describe("false when the same tool_call_id was created before"),
  assignment: AssignmentSchema,
});
export { AssignmentSchema, CreateToolCallResultSchema, CreateToolCallSchema, RunHistorySchema, RunSchema, RunTasksSchema };
export const RunParams = z.object({ run_id: Id });

/** The agent scope of a run-addressed route: the run's agent, undefined for no such run (the handler answers 404). */
export function runAgentScope(execution: Pick<Execution, "runs">): (runId: string) => Promise<string | undefined> {
  return (runId) => execution.runs.agentOf(runId);
}

/** The agent scope of an assignment route: its run's agent (undefined for no such assignment). */
export function assignmentAgentScope(execution: Pick<Execution, "runs" | "history">): (assignmentId: string) => Promise<string | undefined> {
  const runAgent = runAgentScope(execution);
  return async (assignmentId) => {
    const runId = await execution.history.runIdOf(assignmentId);
    return runId === undefined ? undefined : runAgent(runId);
  };
}

/** The runtime API of the execution path. Every route is scoped to the agent of the run it touches. */
export function executionRoutes(execution: Execution, sessions: { getSession(id: string): Promise<{ agent: string } | null> }): RouteDef[] {
  const runAgent = runAgentScope(execution);
  const assignmentAgent = assignmentAgentScope(execution);
  return [
    defineRoute({
      id: "createRun",
      method: "POST",
      path: "/v1/sessions/{session_id}/runs",
      summary: "Start a run in a session (pins the session's agent version, toolset version and subject)",
      tags: ["runtime"],
      permissions: ["runtime:write"],
      errors: ["session_not_found", "agent_version_missing", "run_id_collision"],
      params: z.object({ session_id: SessionIdSchema }),
      response: RunSchema,
      status: 201,
      agentScope: async ({ params }) => (await sessions.getSession(params.session_id))?.agent,
      handler: ({ params }) => execution.runs.create(params.session_id),
    }),
    defineRoute({
      id: "getRun",
      method: "GET",
      path: "/v1/runs/{run_id}",
      summary: "A run and the ids of its tool calls",
      tags: ["runtime"],
      permissions: ["runtime:read"],
      errors: ["run_not_found"],
      params: RunParams,
      response: RunSchema,
      agentScope: ({ params }) => runAgent(params.run_id),
      handler: ({ params }) => execution.runs.get(params.run_id),
    }),
    defineRoute({
      id: "createToolCall",
      method: "POST",
      path: "/v1/runs/{run_id}/tool-calls",
      summary: "Execute a tool of the session's pinned toolset: creates an assignment for an executor to claim",
      tags: ["runtime"],
      permissions: ["runtime:write"],
      errors: [
        "run_not_found",
        "session_not_found",
        "agent_version_not_found",
        "tool_not_found",
        "run_terminated",
        "idempotency_conflict",
        "binding_missing",
        "toolset_version_missing",
        "invalid_input_schema",
      ],
      params: RunParams,
      body: CreateToolCallSchema,
      exactNumbers: true,
      response: CreateToolCallResultSchema,
      status: 201,
      agentScope: ({ params }) => runAgent(params.run_id),
      handler: async ({ params, body }) => {
        const { assignment, created } = await execution.toolCalls.create(params.run_id, body);
        return { created, assignment: await (created ? execution.history.createdView(assignment) : execution.history.assignment(assignment.assignment_id)) };
      },
    }),
    defineRoute({
      id: "getAssignment",
      method: "GET",
      path: "/v1/assignments/{assignment_id}",
      summary: "One tool call's assignment: state, claim holder, receipts, progress and projection",
      tags: ["runtime"],
      permissions: ["runtime:read"],
      errors: ["assignment_not_found"],
      params: z.object({ assignment_id: Id }),
      response: AssignmentSchema,
      agentScope: ({ params }) => assignmentAgent(params.assignment_id),
      handler: ({ params }) => execution.history.assignment(params.assignment_id),
    }),
    defineRoute({
      id: "getRunHistory",
      method: "GET",
      path: "/v1/runs/{run_id}/history",
      summary: "What the model sees: each tool call with its stored projection (never the full receipt)",
      tags: ["runtime"],
      permissions: ["runtime:read"],
      errors: ["run_not_found", "assignment_missing"],
      params: RunParams,
      response: RunHistorySchema,
      agentScope: ({ params }) => runAgent(params.run_id),
      handler: async ({ params }) => {
        const run = await execution.runs.get(params.run_id);
        return { run_id: run.run_id, state: run.state, ...(await execution.history.history(run)) };
      },
    }),
    defineRoute({
      id: "getRunTasks",
      method: "GET",
      path: "/v1/runs/{run_id}/tasks",
      summary: "The run's background tasks: each submitting call's task, state, progress and how many results it has in history",
      tags: ["runtime"],
      permissions: ["runtime:read"],
      errors: ["run_not_found"],
      params: RunParams,
      response: RunTasksSchema,
      agentScope: ({ params }) => runAgent(params.run_id),
      handler: async ({ params }) => {
        const run = await execution.runs.get(params.run_id);
        return { run_id: run.run_id, tasks: await execution.history.tasks(run) };
      },
    }),
    defineRoute({
      id: "completeRun",
      method: "POST",
      path: "/v1/runs/{run_id}:complete",
      summary: "End a run as completed; open tool calls are withdrawn, revoked or abandoned (idempotent)",
      tags: ["runtime"],
      permissions: ["runtime:write"],
      errors: ["run_not_found", "run_terminated"],
      params: RunParams,
      response: RunSchema,
      agentScope: ({ params }) => runAgent(params.run_id),
      handler: ({ params }) => execution.runs.end(params.run_id, "complete"),
    }),
    defineRoute({
      id: "cancelRun",
      method: "POST",
      path: "/v1/runs/{run_id}:cancel",
      summary: "Cancel a run: pending tool calls withdrawn, unconfirmed claims revoked, running work abandoned and its executor told (idempotent)",
      tags: ["runtime"],
      permissions: ["runtime:write"],
      errors: ["run_not_found", "run_terminated"],
      params: RunParams,
      response: RunSchema,
      agentScope: ({ params }) => runAgent(params.run_id),
      handler: ({ params }) => execution.runs.end(params.run_id, "cancel"),
    }),
  ];
}
