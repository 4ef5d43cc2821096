import type { RunRecord } from "../model/records.js";
import { Remembered } from "../../kv/remembered.js";
import type { Recent, VersionedStore } from "../../kv/versioned-store.js";

/** A run read started before its assignment was read, and how to get the run of that assignment. */
export interface RunRead {
  /**
   * The run of `assignment`: the early read when it was of that run, another read otherwise. A run
   * remembered (`recent`) that `trust` does not take is read afresh.
   */
  of(assignment: { assignment_id: string; run_id: string }, trust?: (run: RunRecord) => boolean): Promise<Recent<RunRecord> | null>;
}

/** Enough for every assignment of a busy gateway's last hours; a forgotten one costs one sequential read. */
const DEFAULT_CAPACITY = 100_000;

/**
 * Reads a run *beside* its assignment rather than after it, on every claim and receipt (one round
 * trip less each). Which run an assignment belongs to never changes once it exists, so this process
 * may remember it from the assignments it wrote or read; the run itself is read fresh, unless the
 * caller asks for the run as this process last saw it (`recent`: a claim, whose grant needs the run's
 * fixed fields and which its `accepted`, checked on a fresh read, keeps from starting work for an
 * ended run).
 * Reading the run before the assignment is as safe as after: both reads precede the assignment's
 * compare-and-set, which is what the decision rests on.
 */
export class RunLookup {
  private readonly runOfAssignment: Remembered<string, string>;

  constructor(
    private readonly runs: VersionedStore<RunRecord>,
    capacity = DEFAULT_CAPACITY,
  ) {
    this.runOfAssignment = new Remembered(capacity);
  }

  remember(assignmentId: string, runId: string): void {
    this.runOfAssignment.remember(assignmentId, runId);
  }

  /** Starts reading the run of `assignmentId` now if it is known; `recent`: as this process last saw it, if it did. */
  start(assignmentId: string, { recent = false }: { recent?: boolean } = {}): RunRead {
    const read = (runId: string): Promise<Recent<RunRecord> | null> =>
      recent ? this.runs.recent(runId) : this.runs.get(runId).then((run) => run && { ...run, cached: false });
    const knownRunId = this.runOfAssignment.get(assignmentId);
    const early = knownRunId === undefined ? undefined : read(knownRunId);
    // The caller may return before asking for it (an offline executor, say): never an unhandled rejection.
    early?.catch(() => undefined);
    return {
      of: async (assignment, trust) => {
        this.remember(assignment.assignment_id, assignment.run_id);
        const run = await (early && knownRunId === assignment.run_id ? early : read(assignment.run_id));
        return trust ? this.runs.confirm(assignment.run_id, run, trust) : run;
      },
    };
  }
}
