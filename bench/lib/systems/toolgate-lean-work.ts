/**
 * The work of `toolgate-lean` (`BENCH_FLOOR_WORK=lean` in bench/lib/systems/toolgate-floor-process.ts):
 * each step of a read tool call doing what toolgate's guarantees need, with toolgate's own functions,
 * and nothing else. Every message and record the floor sends as bytes of toolgate's size is built here
 * as the value toolgate sends and encoded with its codec; every message received is decoded and
 * validated with its zod schema. On top of that:
 * - the creation: the request's JSON parsed and checked, the arguments validated against the tool's
 *   JSON Schema (ajv, compiled once) and digested, the assignment's id drawn;
 * - the claim: a claim token drawn, its sha256 kept in the record, the grant built;
 * - the receipts: one sender and one claim for the chain, each receipt id the one its claim mints (an
 *   HMAC), the claim token against the record's sha256, each body's digest, `accepted`'s argument
 *   digest against the assignment's, the projection formed with the tool's budget, the run's events
 *   built for the write;
 * - the executor: the candidate and the grant decoded and checked, the arguments' digest verified,
 *   the receipts built by the runner's receipt builder, the answers decoded.
 * What it leaves out, against toolgate: the HTTP framework and its identities, the stores (revision
 * cache, compare-and-set retries, the reads a stale revision needs), the state tables, the events'
 * deferral, metrics and logs, and every branch a read's happy path does not take.
 */
import { createHash } from "node:crypto";
import { z } from "zod";
import { buildContextPreview } from "../../../src/budget/index.js";
import { claimTokenMatches, newClaimToken } from "../../../src/execution/claims/claim-token.js";
import { assignmentIdFor, defaultOperationKey } from "../../../src/execution/model/ids.js";
import { unstartedAssignment } from "../../../src/execution/model/records.js";
import { buildReceipt, wireReceipt } from "../../../src/runner/receipts.js";
import { compileJsonSchema } from "../../../src/validation/json-schema.js";
import { decode, encode } from "../../../src/wire/codec.js";
import { argumentDigest, receiptBodyDigest } from "../../../src/wire/digest.js";
import { Candidate, ClaimReply, ClaimRequest, ReceiptAnswers, ReceiptMessage, type Grant, type Receipt } from "../../../src/wire/messages.js";
import { isClaimReceiptId } from "../../../src/wire/receipt-ids.js";
import { BENCH_ARGUMENTS, BENCH_PROGRESS, BENCH_RESULT, BENCH_TOOL } from "../protocol-messages.js";

const LEASE_MS = 30_000;
const MAX_RESULT_CONTEXT_BYTES = 4_096;

/** The tool's input schema, as the bench's toolset declares one of its shape. */
const INPUT_SCHEMA = {
  type: "object",
  properties: { cursor: { type: "string" }, filter: { type: "object", properties: { status: { type: "string" } } }, limit: { type: "integer", minimum: 1 } },
  required: ["cursor"],
  additionalProperties: false,
};
const validateArguments = compileJsonSchema(INPUT_SCHEMA, ["input_schema"]).validate!;

const ToolCallBody = z.object({ tool_name: z.string().min(1).max(64), arguments: z.unknown(), tool_call_id: z.string().optional() }).strict();

/** What the producer sends to make a call (also the floor's body: the same bytes on the wire). */
export const LEAN_CALL_BODY = JSON.stringify({ tool_name: BENCH_TOOL.name, arguments: BENCH_ARGUMENTS });

type Value = Record<string, unknown>;

/** The gateway's side: the assignment and run records it last wrote stay in memory, as toolgate's revision cache keeps them. */
export class LeanGateway {
  private readonly assignments = new Map<string, Value>();
  private readonly runs = new Map<string, Value>();
  private readonly sessionId = `ses_${process.pid}`;

  /** A tool call's creation: its watch, its record, its candidate. Throws on a request toolgate would refuse. */
  create(runId: string, body: string): { id: string; watch: Uint8Array; record: Uint8Array; candidate: Uint8Array; answer: () => string } {
    const call = ToolCallBody.parse(JSON.parse(body));
    if (call.tool_name !== BENCH_TOOL.name) throw new Error(`unknown tool ${call.tool_name}`);
    if (this.runFor(runId).state !== "active") throw new Error(`run ${runId} ended`);
    if (!validateArguments(call.arguments)) throw new Error(`arguments: ${JSON.stringify(validateArguments.errors)}`);
    const id = assignmentIdFor(runId, call.tool_call_id);
    const at = Date.now();
    const created = {
      type: "assignment",
      run_id: runId,
      assignment_id: id,
      tool_name: call.tool_name,
      tool_kind: "read",
      from: null,
      to: "pending",
      generation: 0,
      executor_id: null,
      compensates: null,
      outcome: null,
      at,
    };
    const record: Value = {
      assignment_id: id,
      run_id: runId,
      tool_call_id: call.tool_call_id ?? null,
      tool_name: call.tool_name,
      binding_id: BENCH_TOOL.bindingId,
      scope: BENCH_TOOL.scope,
      tool_kind: "read",
      arguments: call.arguments,
      argument_digest: argumentDigest(call.arguments),
      operation_key: defaultOperationKey(runId, id),
      max_result_context_bytes: MAX_RESULT_CONTEXT_BYTES,
      ...unstartedAssignment(),
      compensates: null,
      deferred_events: [created],
      created_at: at,
      updated_at: at,
    };
    this.assignments.set(id, record);
    const candidate = { assignment_id: id, run_id: runId, tool_name: call.tool_name, binding_id: BENCH_TOOL.bindingId, generation: 0, created_at: at };
    return {
      id,
      watch: encode({ assignment_id: id, generation: 0, due_at: at + LEASE_MS }),
      record: encode(record),
      candidate: encode(candidate),
      answer: () => LeanGateway.answer(record),
    };
  }

  /** The run's record with the call listed. */
  list(runId: string, id: string): Uint8Array {
    const run = this.runFor(runId);
    run.assignment_ids = [...(run.assignment_ids as string[]), id];
    return encode(run);
  }

  /** The run a call is made in, as toolgate has it from the run it read at the creation. */
  private runFor(runId: string): Value {
    let run = this.runs.get(runId);
    if (!run) {
      run = {
        run_id: runId,
        session_id: this.sessionId,
        agent: BENCH_TOOL.agent,
        agent_version: `${BENCH_TOOL.agent}.1`,
        toolset: `${BENCH_TOOL.agent}-tools`,
        toolset_version: "v1",
        subject: "user-42",
        state: "active",
        assignment_ids: [],
        created_at: Date.now(),
        ended_at: null,
      };
      this.runs.set(runId, run);
    }
    return run;
  }

  /** The HTTP answer to a creation: the call as the runtime reads it, from the record the creation wrote. */
  static answer(a: Value): string {
    const { assignment_id, run_id, tool_call_id, tool_name, tool_kind, state, generation, argument_digest, operation_key, created_at, updated_at } = a;
    const at = new Date(created_at as number).toISOString();
    return JSON.stringify({
      assignment: { assignment_id, run_id, tool_call_id, tool_name, tool_kind, state, generation, argument_digest, operation_key, created_at, updated_at },
      created_at: at,
      history_url: `/v1/runs/${run_id}/history`,
      events_url: `/v1/runs/${run_id}/events`,
    });
  }

  /** A claim request: the claimed record and the grant. */
  claim(id: string, request: Uint8Array): { record: Uint8Array; reply: Uint8Array } {
    const asked = decode(ClaimRequest, request);
    const a = this.assignments.get(asked.assignment_id);
    if (!a || asked.assignment_id !== id || a.state !== "pending" || a.generation !== asked.generation) throw new Error(`claim of ${id}: not claimable`);
    const token = newClaimToken();
    const at = Date.now();
    const claim = { executor_id: asked.executor_id, generation: asked.generation, token_sha256: token.sha256, claimed_at: at, lease_expires_at: at + LEASE_MS };
    const claimed = {
      type: "assignment",
      run_id: a.run_id,
      assignment_id: id,
      tool_name: a.tool_name,
      tool_kind: "read",
      from: "pending",
      to: "claimed",
      generation: 0,
      executor_id: asked.executor_id,
      compensates: null,
      outcome: null,
      at,
    };
    const next: Value = { ...a, state: "claimed", claim, deferred_events: [...(a.deferred_events as Value[]), claimed], updated_at: at };
    this.assignments.set(id, next);
    const run = this.runs.get(a.run_id as string)!;
    const grant: Grant = {
      assignment_id: id,
      run_id: a.run_id as string,
      session_id: run.session_id as string,
      executor_id: asked.executor_id,
      tool_name: a.tool_name as string,
      binding_id: a.binding_id as string,
      tool_kind: "read",
      arguments: a.arguments,
      argument_digest: a.argument_digest as string,
      subject: run.subject as string,
      agent: run.agent as string,
      agent_version: run.agent_version as string,
      toolset: run.toolset as string,
      toolset_version: run.toolset_version as string,
      operation_key: a.operation_key as string,
      claim_token: token.token,
      generation: asked.generation,
      lease_expires_at: claim.lease_expires_at,
    };
    return { record: encode(next), reply: encode({ status: "granted", grant }) };
  }

  /** A read's chain (`accepted`, its report, its outcome): the completed record, the run's events, the answers. */
  settle(id: string, message: Uint8Array, streamSeq: number, executorOfSubject: string): { record: Uint8Array; event: Uint8Array; answers: Uint8Array } {
    const decoded = decode(ReceiptMessage, message);
    const chain: Receipt[] = Array.isArray(decoded) ? decoded : [decoded];
    const [accepted, progress, completed] = chain;
    if (chain.length !== 3 || accepted?.kind !== "accepted" || progress?.kind !== "progress" || completed?.kind !== "completed")
      throw new Error(`${id}: not a read's chain`);
    const a = this.assignments.get(id)!;
    const claim = a.claim as { executor_id: string; generation: number; token_sha256: string; lease_expires_at: number };
    const at = Date.now();
    if (at > claim.lease_expires_at) throw new Error(`${id}: lease expired`);
    for (const r of chain) {
      if (r.assignment_id !== id || r.executor_id !== executorOfSubject || r.executor_id !== claim.executor_id)
        throw new Error(`${r.receipt_id}: not the claim holder's`);
      if (!claimTokenMatches(r.claim_token, claim.token_sha256)) throw new Error(`${r.receipt_id}: wrong claim token`);
      if (!isClaimReceiptId(r, claim.generation)) throw new Error(`${r.receipt_id}: not its claim's receipt id`);
    }
    if (accepted.argument_digest !== a.argument_digest) throw new Error(`${id}: argument digest mismatch`);
    const applied = (r: Receipt) => ({ receipt_id: r.receipt_id, kind: r.kind, body_digest: receiptBodyDigest(r), stream_seq: streamSeq, at });
    const finalReceipt = applied(completed);
    const projection = {
      receipt_id: completed.receipt_id,
      context_preview: buildContextPreview(completed.result, { maxResultContextBytes: a.max_result_context_bytes as number, kind: "completed" }),
      computed_at: at,
    };
    const progressEntry = {
      assignment_id: id,
      seq: progress.seq,
      receipt_id: progress.receipt_id,
      progress: progress.progress,
      at,
      indexed: { executor_id: progress.executor_id, body_digest: receiptBodyDigest(progress), stream_seq: streamSeq },
    };
    const next: Value = {
      ...a,
      state: "completed",
      accepted: applied(accepted),
      final: finalReceipt,
      outcome: { kind: "completed" },
      progress_log: [progressEntry],
      projection,
      updated_at: at,
    };
    delete next.deferred_events;
    this.assignments.delete(id);
    const runId = a.run_id as string;
    const step = (from: string, to: string, outcome: Value | null) => ({
      type: "assignment",
      run_id: runId,
      assignment_id: id,
      tool_name: a.tool_name,
      tool_kind: "read",
      from,
      to,
      generation: claim.generation,
      executor_id: claim.executor_id,
      compensates: null,
      outcome,
      at,
    });
    const events = [
      ...(a.deferred_events as Value[]),
      step("claimed", "running", null),
      { type: "progress", run_id: runId, assignment_id: id, seq: progress.seq, progress: progress.progress, at },
      step("running", "completed", { kind: "completed" }),
    ];
    const answers = chain.map((r) => ({ receipt_id: r.receipt_id, assignment_id: id, kind: r.kind, status: "recorded" }));
    return { record: encode(next), event: encode(events), answers: encode(answers) };
  }
}

/** An executor's side: the candidate and grant checked, the receipts built as the runner builds them. */
export class LeanExecutor {
  constructor(private readonly executorId: string) {}

  /** The claim request for a candidate. */
  claimRequest(candidate: Uint8Array): { id: string; request: Uint8Array } {
    const c = decode(Candidate, candidate);
    return { id: c.assignment_id, request: encode({ assignment_id: c.assignment_id, executor_id: this.executorId, generation: c.generation }) };
  }

  /** The read's chain for a granted claim: `accepted`, one report, the outcome; and the first receipt's id. */
  chain(reply: Uint8Array): { message: Uint8Array; firstId: string } {
    const r = decode(ClaimReply, reply);
    if (r.status !== "granted") throw new Error(`claim refused: ${r.code}`);
    const grant = r.grant;
    if (argumentDigest(grant.arguments) !== grant.argument_digest) throw new Error(`${grant.assignment_id}: argument digest mismatch`);
    const now = Date.now();
    const receipts = [
      buildReceipt(grant, { kind: "accepted", operation_key: grant.operation_key, argument_digest: grant.argument_digest }, now),
      buildReceipt(grant, { kind: "progress", seq: 1, progress: BENCH_PROGRESS }, now),
      buildReceipt(grant, { kind: "completed", result: BENCH_RESULT }, now),
    ].map((saved) => wireReceipt(saved, grant.claim_token, false));
    return { message: encode(receipts), firstId: receipts[0]!.receipt_id };
  }

  /** The gateway's answers to a chain: all recorded, or the call failed. */
  answered(answers: Uint8Array): void {
    const decoded = decode(ReceiptAnswers, answers);
    for (const a of Array.isArray(decoded) ? decoded : [decoded]) if (a.status !== "recorded") throw new Error(`${a.receipt_id}: ${a.status}`);
  }
}

/** Whether an assignment record the producer's watch receives is a completed one carrying its projection (as the toolgate producer reads it). */
const Completion = z.looseObject({ state: z.string(), projection: z.unknown().optional() });
export function leanCompleted(record: Uint8Array): boolean {
  const a = decode(Completion, record);
  return a.state === "completed" && a.projection !== undefined;
}

/** A digest of the identity's key, as a gateway compares a presented one (the key itself is never kept). */
export function keyDigest(key: string): Buffer {
  return createHash("sha256").update(key).digest();
}
