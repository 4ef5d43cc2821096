import { z } from "zod";
import { jsonValueSchema } from "../../budget/index.js";
import { ToolNameSchema } from "../../config/ids.js";
import type { ResolvedTool } from "../../config/schemas.js";
import { ToolgateError } from "../../errors/toolgate-error.js";
import { tooBigDetail } from "../../validation/details.js";
import { compileJsonSchema, schemaDetails } from "../../validation/json-schema.js";
import { encode } from "../../wire/codec.js";
import { argumentDigest } from "../../wire/digest.js";
import { Id, OperationKey } from "../../wire/primitives.js";
import type { Dispatcher } from "../dispatch/dispatcher.js";
import { assignmentIdFor, defaultOperationKey } from "../model/ids.js";
import { unstartedAssignment, type AssignmentRecord, type RunRecord } from "../model/records.js";
import { runIsOpen } from "../model/run-states.js";
import type { Versioned, VersionedStore } from "../../kv/versioned-store.js";
import type { Watchlist } from "../claims/watchlist.js";

/** Of one NATS message, what a new tool call's record leaves for what its life adds (claims, applied receipts). */
const ASSIGNMENT_ROOM_BYTES = 64 * 1024;

export interface ToolResolver {
  resolveTool(sessionId: string, toolName: string): Promise<ResolvedTool>;
}

/** A tool call as the runtime asks for it (`POST /v1/runs/{id}/tool-calls`, and an MCP session's `tools/call`). */
export const ToolCallRequest = z.strictObject({
  tool_name: ToolNameSchema,
  arguments: jsonValueSchema.default({}).describe("Validated against the tool's input_schema"),
  operation_key: OperationKey.optional().describe("The product's idempotency key of the operation; default <run_id>/<assignment_id>"),
  tool_call_id: Id.optional().describe("The model's tool call id: creating the same tool call again returns the same assignment"),
});
export type ToolCallRequest = z.output<typeof ToolCallRequest>;

/**
 * Creating a tool call: the tool must be in the session's pinned toolset, the arguments must
 * validate against its `input_schema`; then the assignment is written `pending` and dispatched.
 * With a `tool_call_id` the creation is idempotent: the same request again returns the same
 * assignment, a different request under the same id is a 409.
 */
export class ToolCallService {
  constructor(
    private readonly runs: VersionedStore<RunRecord>,
    private readonly assignments: VersionedStore<AssignmentRecord>,
    private readonly tools: ToolResolver,
    private readonly dispatcher: Dispatcher,
    private readonly watchlist: Watchlist,
    /** The largest message the server takes (its `max_payload`): the stored tool call must fit in one. */
    private readonly maxMessageBytes: () => number,
    private readonly now: () => number = Date.now,
  ) {}

  async create(runId: string, req: ToolCallRequest): Promise<{ assignment: AssignmentRecord; created: boolean }> {
    // The run as this process last saw it, read afresh when it would refuse the call: a stale one only
    // starts the compare-and-set that lists the call, which refuses it once the run has ended.
    const found = await this.runs.recent(runId, runIsOpen);
    if (!found) throw new ToolgateError("run_not_found", `run '${runId}' does not exist`);
    const run = found.value;
    if (!runIsOpen(run)) throw new ToolgateError("run_terminated", `run '${runId}' is ${run.ending ? "ending" : run.state}: it takes no more tool calls`);
    const { tool, binding } = await this.tools.resolveTool(run.session_id, req.tool_name);

    const { validate, details } = compileJsonSchema(tool.input_schema, ["arguments"]);
    if (!validate) throw new ToolgateError("invalid_input_schema", `the input_schema of tool '${tool.name}' does not compile`, details);
    const argumentDetails = schemaDetails(validate, req.arguments, ["arguments"]);
    if (argumentDetails.length > 0) throw ToolgateError.validation(argumentDetails, `the arguments do not match the input_schema of tool '${tool.name}'`);

    const assignmentId = assignmentIdFor(run.run_id, req.tool_call_id);
    const now = this.now();
    // As its creation writes it (the run events it keeps for its next write included), measured once.
    const record: AssignmentRecord = this.assignments.prepareCreate({
      assignment_id: assignmentId,
      run_id: run.run_id,
      tool_call_id: req.tool_call_id ?? null,
      tool_name: tool.name,
      binding_id: binding.binding_id,
      scope: binding.executor_scope,
      tool_kind: binding.tool_kind,
      arguments: req.arguments,
      argument_digest: argumentDigest(req.arguments),
      operation_key: req.operation_key ?? defaultOperationKey(run.run_id, assignmentId),
      max_result_context_bytes: tool.max_result_context_bytes,
      ...(tool.preserve_fields ? { preserve_fields: tool.preserve_fields } : {}),
      ...(tool.task_deadline_ms ? { task_deadline_ms: tool.task_deadline_ms } : {}),
      ...unstartedAssignment(),
      compensates: null,
      created_at: now,
      updated_at: now,
    });

    const encoded = this.encodedWithinLimit(record);

    // Watched first: should this process die between the steps below, a sweeper finishes the dispatch;
    // once the candidate is out, the same watch looks for a candidate taken but never claimed. A call
    // watched already was asked for before (its tool_call_id again): the stored one, if it got that
    // far, is replayed; else this request makes it, under the earlier request's watch.
    const { watch, res } = await this.watchedCreation(record, found, encoded);
    // Stored by an earlier request, or lost a race with the same tool_call_id: the one watch written
    // stands for the call whichever request made it (removing it here could leave the winner's
    // creation unwatched).
    if (!res.created) return { assignment: await this.replay(res.existing.value, record), created: false };
    const dispatched = res.assignment;
    // Withdrawn (the run ended first): nothing is left to watch. Listed, its watch may be what a claim
    // made soon after relies on. A watch this request did not write is left to a sweeper.
    if ((!dispatched || dispatched.state === "withdrawn") && watch !== null) await this.watchlist.unwatch(assignmentId, watch);
    if (dispatched?.state === "withdrawn") throw new ToolgateError("run_terminated", `run '${runId}' ended while the tool call was created`);
    return { assignment: dispatched ?? record, created: true };
  }

  /**
   * The creation's watch, then the assignment with its candidate (`Dispatcher.create`).
   * - Where watches are keys of the assignments' own stream (store layout 6), the assignment is
   *   published right behind its watch, without waiting for the watch's reply: the server stores one
   *   connection's messages to one stream in their order, so a stored assignment has its watch
   *   stored. A watch that failed where its assignment did not is written again before anything is
   *   answered; one there already (null) is the earlier request's.
   * - Elsewhere the watch's reply comes first. A watch there already was written by an earlier
   *   request for the same call (its tool_call_id again): the call it stored, if it got that far, is
   *   replayed; else this request makes it. A first request reads nothing (a tool_call_id asked for
   *   the first time cannot be stored yet).
   */
  private async watchedCreation(
    record: AssignmentRecord,
    run: Versioned<RunRecord>,
    encoded: Uint8Array,
  ): Promise<{ watch: number | null; res: Awaited<ReturnType<Dispatcher["create"]>> }> {
    const id = record.assignment_id;
    if (!this.watchlist.besideAssignments) {
      const watch = await this.dispatcher.watchCreation(id, record.created_at);
      const earlier = watch === null ? await this.assignments.get(id) : null;
      return { watch, res: earlier ? { created: false, existing: earlier } : await this.dispatcher.create(record, run, encoded) };
    }
    const [watched, created] = await Promise.allSettled([this.dispatcher.watchCreation(id, record.created_at), this.dispatcher.create(record, run, encoded)]);
    if (created.status === "rejected") throw created.reason;
    if (watched.status === "fulfilled" || !created.value.created) return { watch: watched.status === "fulfilled" ? watched.value : null, res: created.value };
    return { watch: await this.dispatcher.watchCreation(id, record.created_at), res: created.value };
  }

  /**
   * The record's encoding, which its creation then writes; arguments too large to store the call in
   * one NATS message, with room left for its claims and receipts, are a 400 on `arguments`.
   */
  private encodedWithinLimit(record: AssignmentRecord): Uint8Array {
    const allowed = this.maxMessageBytes() - ASSIGNMENT_ROOM_BYTES;
    const encoded = encode(record);
    const size = encoded.byteLength;
    if (size <= allowed) return encoded;
    const bound = `at most ${allowed} bytes for the stored tool call: the NATS server's max_payload (${this.maxMessageBytes()}) less ${ASSIGNMENT_ROOM_BYTES} for its claims and receipts`;
    throw ToolgateError.validation(
      [tooBigDetail("arguments", size, bound, "stored with these arguments, the tool call")],
      "the arguments are too large to store: pass a reference to the data instead",
    );
  }

  /** The same tool call asked again: the stored assignment (dispatch finished if need be), or a 409 for another request. */
  private async replay(stored: AssignmentRecord, asked: AssignmentRecord): Promise<AssignmentRecord> {
    if (!sameRequest(stored, asked))
      throw new ToolgateError(
        "idempotency_conflict",
        `tool call '${asked.tool_call_id}' of run '${asked.run_id}' was already created with another tool, arguments or operation key`,
      );
    return (await this.dispatcher.dispatch(stored.assignment_id)) ?? stored;
  }
}

/** The same tool call again: same tool, arguments and operation key. */
function sameRequest(stored: AssignmentRecord, asked: AssignmentRecord): boolean {
  return stored.tool_name === asked.tool_name && stored.argument_digest === asked.argument_digest && stored.operation_key === asked.operation_key;
}
