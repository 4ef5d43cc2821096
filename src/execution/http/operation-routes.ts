import { z } from "zod";
import { ToolgateError } from "../../errors/toolgate-error.js";
import { EventStream, type SseEvent } from "../../http/event-stream.js";
import { defineRoute, type RouteDef } from "../../http/route.js";
import { HttpTimestamp } from "../../http/timestamp.js";
import { Id, Reason } from "../../wire/primitives.js";
import type { Execution } from "../execution.js";
import { RunEvent } from "../events/run-events.js";
import type { StoredRunEvent } from "../events/event-log.js";
import { DetachedClaims } from "../../wire/messages.js";
import { OperatorOutcome } from "../operations/operator-settle.js";
import { AssignmentSchema, RunParams, assignmentAgentScope, runAgentScope } from "./routes.js";

const AssignmentParams = z.object({ assignment_id: Id });
/** An event id as it travels in a query or a header: decimal digits. */
const Sequence = z
  .string()
  .regex(/^[0-9]{1,16}$/, "an event id of this stream (a non-negative integer)")
  .transform(Number);

export const ReconcileSchema = OperatorOutcome.meta({ title: "Reconcile" });

export const DetachResultSchema = z.object({ executor_id: Id, scope: Id, ...DetachedClaims.shape }).meta({ title: "DetachResult" });

/** A run event as the event stream serves it: the stored event with its time as RFC 3339. */
const [runEvent, assignmentEvent, progressEvent, taskCancelEvent, compensationEvent, taskResultEvent] = RunEvent.options;
export const RunEventSchema = z
  .discriminatedUnion("type", [
    runEvent.extend({ at: HttpTimestamp }),
    assignmentEvent.extend({ at: HttpTimestamp }),
    progressEvent.extend({ at: HttpTimestamp }),
    taskCancelEvent.extend({ at: HttpTimestamp }),
    compensationEvent.extend({ at: HttpTimestamp }),
    taskResultEvent.extend({ at: HttpTimestamp }),
  ])
  .meta({ title: "RunEvent" });

export const CancelTaskSchema = z
  .strictObject({ reason: Reason.min(1).optional() })
  .default({})
  .meta({ title: "CancelTask" });
export const CompensationResultSchema = z.object({
  created: z.boolean().describe("false when this write was compensated before"),
  compensation: AssignmentSchema,
});
export const DetachExecutorSchema = z.strictObject({ scope: Id.describe("The executor scope it belongs to") }).meta({ title: "DetachExecutor" });

/**
 * The section-4 operations besides run cancel (which lives with the runs), and the run's event
 * stream: see docs/operations-matrix.md for who may call which and what each changes.
 */
export function operationRoutes(execution: Execution): RouteDef[] {
  const runAgent = runAgentScope(execution);
  const assignmentAgent = assignmentAgentScope(execution);
  return [
    defineRoute({
      id: "getRunEvents",
      method: "GET",
      path: "/v1/runs/{run_id}/events",
      summary: "The run's events as Server-Sent Events (id = stream sequence); resume with Last-Event-ID or ?after=",
      tags: ["runtime"],
      permissions: ["runtime:read"],
      errors: ["run_not_found"],
      params: RunParams,
      query: z.object({ after: Sequence.optional().describe("Start after this event id (Last-Event-ID wins when both are sent)") }),
      response: RunEventSchema,
      stream: "sse",
      agentScope: ({ params }) => runAgent(params.run_id),
      handler: async ({ params, query, headers, signal }) => {
        await execution.runs.get(params.run_id);
        const header = headers["last-event-id"];
        const resumed = header === undefined ? undefined : Sequence.safeParse(header);
        if (resumed && !resumed.success)
          throw ToolgateError.validation([
            { path: "headers.last-event-id", code: "invalid", message: "Last-Event-ID is an event id of this stream (a non-negative integer)" },
          ]);
        const after = resumed?.data ?? query.after ?? 0;
        return new EventStream(toSse(execution.events.follow(params.run_id, after, signal)), execution.options.eventHeartbeatMs);
      },
    }),
    defineRoute({
      id: "cancelTask",
      method: "POST",
      path: "/v1/assignments/{assignment_id}:cancel-task",
      summary: "Ask the executor to stop a running business task; it ends cancelled when the executor confirms, completed if it finished first (idempotent)",
      tags: ["runtime"],
      permissions: ["runtime:write"],
      errors: ["assignment_not_found", "task_not_running"],
      params: AssignmentParams,
      body: CancelTaskSchema,
      response: AssignmentSchema,
      agentScope: ({ params }) => assignmentAgent(params.assignment_id),
      handler: async ({ params, body }) => {
        await execution.taskCancel.request(params.assignment_id, body.reason);
        return execution.history.assignment(params.assignment_id);
      },
    }),
    defineRoute({
      id: "compensate",
      method: "POST",
      path: "/v1/assignments/{assignment_id}:compensate",
      summary: "Undo a completed write by a new compensation assignment (own operation key and receipts); idempotent",
      tags: ["runtime"],
      permissions: ["runtime:write"],
      errors: ["assignment_not_found", "not_completed", "read_not_compensable", "compensation_not_compensable", "compensation_missing"],
      params: AssignmentParams,
      response: CompensationResultSchema,
      agentScope: ({ params }) => assignmentAgent(params.assignment_id),
      handler: async ({ params }) => {
        const { created, compensation } = await execution.compensation.compensate(params.assignment_id);
        return { created, compensation: await execution.history.assignment(compensation.assignment_id) };
      },
    }),
    defineRoute({
      id: "reconcileAssignment",
      method: "POST",
      path: "/v1/assignments/{assignment_id}:reconcile",
      summary: "Settle a reconciliation_required assignment as an operator (an audited operator receipt); idempotent",
      tags: ["operations"],
      permissions: ["tools:execute"],
      errors: ["assignment_not_found", "run_terminated", "not_reconciliation_required", "receipt_conflict"],
      params: AssignmentParams,
      body: ReconcileSchema,
      exactNumbers: true,
      response: AssignmentSchema,
      agentScope: ({ params }) => assignmentAgent(params.assignment_id),
      handler: async ({ params, body, identity }) => {
        await execution.settlement.settle(params.assignment_id, identity.name, body);
        return execution.history.assignment(params.assignment_id);
      },
    }),
    defineRoute({
      id: "detachExecutor",
      method: "POST",
      path: "/v1/executors/{executor_id}:detach",
      summary: "Detach an executor: its claims return to the candidates, its confirmed work is settled by the detach edges; the runs go on (idempotent)",
      tags: ["operations"],
      permissions: ["tools:execute"],
      errors: [],
      params: z.object({ executor_id: Id }),
      body: DetachExecutorSchema,
      response: DetachResultSchema,
      handler: async ({ params, body }) => ({
        executor_id: params.executor_id,
        scope: body.scope,
        ...(await execution.detach.detach(body.scope, params.executor_id)),
      }),
    }),
  ];
}

/**
 * The run's stored events as SSE: a message's last event carries its sequence as `id`; the events
 * before it in the same message (the events of one write, store layout 5) carry none, so a client
 * that drops inside a message resumes from the message before and reads all of it again.
 */
async function* toSse(events: AsyncIterable<StoredRunEvent>): AsyncGenerator<SseEvent> {
  for await (const { seq, event, last } of events) yield last ? { id: String(seq), data: event } : { data: event };
}
