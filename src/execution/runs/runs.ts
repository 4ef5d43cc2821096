import type { Session } from "../../config/schemas.js";
import { ToolgateError } from "../../errors/toolgate-error.js";
import type { Logger } from "../../log/logger.js";
import type { ExecutorControl } from "../../wire/messages.js";
import { RUN_END_EVENTS, nextAssignmentState } from "../model/assignment-states.js";
import type { CandidateQueue } from "../dispatch/candidate-queue.js";
import { forEachConcurrently } from "../../kv/concurrently.js";
import type { ControlChannel } from "../transport/control-channel.js";
import { newRunId } from "../model/ids.js";
import type { AssignmentRecord, RunRecord } from "../model/records.js";
import { Remembered } from "../../kv/remembered.js";
import { nextRunState, runEndEvent, runIsOpen, type RunEvent } from "../model/run-states.js";
import type { Versioned, VersionedStore } from "../../kv/versioned-store.js";
import type { Watchlist } from "../claims/watchlist.js";

export interface SessionLookup {
  getSession(sessionId: string): Promise<Session | null>;
  getAgentVersion(agentVersion: string): Promise<{ toolset: string; toolset_version: string } | null>;
}

/** Assignments settled in parallel when a run ends. */
const END_CONCURRENCY = 16;

/** Runs whose agent this process remembers: every run of a busy gateway's last hours. */
const AGENTS_REMEMBERED = 100_000;

/**
 * Runs: created in a session (pinning its agent version, toolset version and subject), ended once by
 * `complete` or `cancel`. Ending a run takes every open assignment with it, by the state table:
 * pending ones are withdrawn (their candidate deleted), unconfirmed claims revoked, running work
 * abandoned, and the executors concerned are told. The assignments carry the end before the run
 * does (see `end`), so a receipt is decided on its assignment alone.
 */
export class RunService {
  /** A run's agent never changes: the scope check of every run-addressed request needs no read once known. */
  private readonly agentOfRun = new Remembered<string, string>(AGENTS_REMEMBERED);

  constructor(
    private readonly runs: VersionedStore<RunRecord>,
    private readonly assignments: VersionedStore<AssignmentRecord>,
    private readonly candidates: CandidateQueue,
    private readonly sessions: SessionLookup,
    private readonly control: ControlChannel,
    private readonly watchlist: Watchlist,
    /** How long after an end was asked for a sweeper finishes it, should the asking process have died. */
    private readonly takeOverAfterMs: number,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  async create(sessionId: string): Promise<RunRecord> {
    const res = await this.write(sessionId, newRunId());
    if (!res.created) throw new ToolgateError("run_id_collision", "run id collision; retry");
    return res.run;
  }

  /**
   * The run of `sessionId` named `runId`: created on first use, the stored one after (whichever
   * process made it). One this process remembers is not read again: that it exists and whose session
   * it is never change (a run is never removed), and its state is as this process last saw it, for
   * the caller to decide on afresh (a tool call's creation reads a run that looks ended).
   */
  async open(sessionId: string, runId: string): Promise<RunRecord> {
    const known = await this.runs.recent(runId);
    const run = known ? known.value : (await this.write(sessionId, runId)).run;
    if (run.session_id !== sessionId) throw new ToolgateError("run_id_collision", `run '${runId}' belongs to another session`);
    return run;
  }

  private async write(sessionId: string, runId: string): Promise<{ created: boolean; run: RunRecord }> {
    const session = await this.sessions.getSession(sessionId);
    if (!session) throw new ToolgateError("session_not_found", `session '${sessionId}' does not exist: create one with POST /v1/sessions`);
    const pinned = await this.sessions.getAgentVersion(session.agent_version);
    if (!pinned)
      throw new ToolgateError("agent_version_missing", `agent version '${session.agent_version}' of session '${sessionId}' is missing from the store`);
    const run: RunRecord = {
      run_id: runId,
      session_id: session.session_id,
      agent: session.agent,
      agent_version: session.agent_version,
      toolset: pinned.toolset,
      toolset_version: pinned.toolset_version,
      subject: session.subject,
      state: "active",
      assignment_ids: [],
      created_at: this.now(),
      ended_at: null,
    };
    const res = await this.runs.create(run.run_id, run);
    const stored = res.created ? run : res.existing.value;
    this.agentOfRun.remember(stored.run_id, stored.agent);
    return { created: res.created, run: stored };
  }

  async get(runId: string): Promise<RunRecord> {
    const run = await this.runs.get(runId);
    if (!run) throw new ToolgateError("run_not_found", `run '${runId}' does not exist`);
    this.agentOfRun.remember(runId, run.value.agent);
    return run.value;
  }

  /** The agent a run serves (the agent scope of requests addressed to it), or undefined for no such run. */
  async agentOf(runId: string): Promise<string | undefined> {
    const known = this.agentOfRun.get(runId);
    if (known !== undefined) return known;
    const run = await this.runs.get(runId);
    if (run) this.agentOfRun.remember(runId, run.value.agent);
    return run?.value.agent;
  }

  /**
   * Ends the run in three compare-and-sets, so that its assignments carry the end before the run
   * does: (1) the end is recorded (`ending`; the run takes no more tool calls or claims, so its list
   * of assignments is fixed), (2) each listed assignment is settled, (3) the run is written
   * `completed` / `cancelled`. Once a run is terminal, every assignment of its list is settled (or
   * waits for reconciliation), and a late receipt finds that on the assignment itself.
   * Idempotent: ending it the same way again repeats (2) and (3), which finishes an end a crash
   * interrupted. Ending it the other way is a 409: the first end recorded wins. The watch written
   * first lets a sweeper finish an end whose process died between the steps (`finishEnd`); a run
   * that does not exist, or is already terminal, writes none (a terminal run is never open again, so
   * a remembered one is taken as it is).
   */
  async end(runId: string, event: RunEvent): Promise<RunRecord> {
    const known = await this.runs.recent(runId, (run) => run.state !== "active");
    if (!known) throw new ToolgateError("run_not_found", `run '${runId}' does not exist`);
    if (known.value.state !== "active") return this.endAgain(known, event);
    const watch = await this.watchlist.watchRunEnd(runId, this.now() + this.takeOverAfterMs);
    const recorded = await this.runs.mutate(runId, (run) =>
      runIsOpen(run) ? { write: { ...run, ending: { event, at: this.now() } }, result: undefined } : { result: undefined },
    );
    if (!recorded) {
      await this.watchlist.unwatchRunEnd(runId, watch);
      throw new ToolgateError("run_not_found", `run '${runId}' does not exist`);
    }
    const run = recorded.value;
    const other = runEndEvent(run);
    if (other !== event) {
      // Ending the other way: that end's own watch, or this one, stands until it is finished.
      if (run.state !== "active") await this.watchlist.unwatchRunEnd(runId, watch);
      const now = run.state === "active" ? `being ended by '${other}'` : run.state;
      throw new ToolgateError("run_terminated", `run '${runId}' is already ${now}`);
    }
    const ended = await this.finish(recorded);
    await this.watchlist.unwatchRunEnd(runId, watch);
    return ended;
  }

  /** `end` of a terminal run: the same end again repeats its settling (an earlier release settled after the terminal write), another is a 409. */
  private async endAgain(terminal: Versioned<RunRecord>, event: RunEvent): Promise<RunRecord> {
    if (runEndEvent(terminal.value) !== event) throw new ToolgateError("run_terminated", `run '${terminal.value.run_id}' is already ${terminal.value.state}`);
    return this.finish(terminal);
  }

  /**
   * Finishes the end recorded on the run (steps 2 and 3 of `end`): what a sweeper does for an end
   * whose process died. The run as it stands afterwards (a run without a recorded end is left as
   * it is), null when there is none.
   */
  async finishEnd(runId: string): Promise<RunRecord | null> {
    const found = await this.runs.get(runId);
    if (!found?.value.ending) return found?.value ?? null;
    this.log.warn({ run_id: runId, event: found.value.ending.event }, "a run's end was left unfinished; finishing it");
    return this.finish(found);
  }

  private async finish(found: Versioned<RunRecord>): Promise<RunRecord> {
    const told = await this.settleAssignments(found.value);
    const res = await this.runs.mutate(
      found.value.run_id,
      (run) => {
        const to = run.ending && nextRunState(run.state, run.ending.event);
        if (!to) return { result: undefined };
        // Terminal without `ending`: the shape of a run ended by an earlier release.
        const { ending: _ending, ...rest } = run;
        return { write: { ...rest, state: to, ended_at: this.now() }, result: undefined };
      },
      found,
    );
    if (!res) throw new ToolgateError("run_not_found", `run '${found.value.run_id}' does not exist`);
    this.log.info({ run_id: res.value.run_id, state: res.value.state, assignments: res.value.assignment_ids.length, executors_told: told }, "run ended");
    return res.value;
  }

  /** Settles every assignment of the run's list and tells the executors of revoked and abandoned ones; returns how many were told. */
  private async settleAssignments(run: RunRecord): Promise<number> {
    const told = new Map<string, { scope: string; executorId: string; ids: string[] }>();
    await forEachConcurrently(run.assignment_ids, END_CONCURRENCY, async (id) => {
      const settled = await this.settle(id);
      const holder = settled?.claim;
      if (settled && holder && (settled.state === "revoked" || settled.state === "abandoned")) {
        const key = `${settled.scope}.${holder.executor_id}`;
        const entry = told.get(key) ?? { scope: settled.scope, executorId: holder.executor_id, ids: [] };
        entry.ids.push(id);
        told.set(key, entry);
      }
    });
    for (const { scope, executorId, ids } of told.values()) {
      const control: ExecutorControl = { type: "run_cancelled", run_id: run.run_id, assignment_ids: ids };
      await this.control.tell(scope, executorId, control, `run_cancelled.${run.run_id}.${scope}.${executorId}.${ids.length}`);
    }
    return told.size;
  }

  /** Applies the first run-end event the table allows (withdraw, revoke, abandon); a settled assignment is left as it is. */
  private async settle(assignmentId: string): Promise<AssignmentRecord | null> {
    const res = await this.assignments.mutate(assignmentId, (a) => {
      for (const event of RUN_END_EVENTS) {
        const to = nextAssignmentState(a.state, event);
        if (to) return { write: { ...a, state: to, updated_at: this.now() }, result: undefined };
      }
      return { result: undefined };
    });
    if (res?.value.state === "withdrawn") await this.candidates.takeBack(res.value);
    return res?.value ?? null;
  }
}
