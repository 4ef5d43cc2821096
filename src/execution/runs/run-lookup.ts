import type { RunRecord } from "../model/records.js";
import { Remembered } from "../../kv/remembered.js";
import type { Recent, VersionedStore } from "../../kv/versioned-store.js";

/** A run read started before its assignment was read, and how to get the run of that assignment. */
export interface RunRead {
  /**
   * The run of `assignment`: the early read when it was of that run, another read otherwise. A run
   * remembered (`recent`) that `trust` does not take is read afresh.
   */
  of(assignment: { assignment_id: string; run_id: string }, trust: (run: RunRecord) => boolean): Promise<Recent<RunRecord> | null>;
}

/** Enough for every assignment of a busy gateway's last hours; a forgotten one costs one sequential read. */
const DEFAULT_CAPACITY = 100_000;

/**
 * Reads a run *beside* its assignment rather than after it, on every claim (one round trip less
 * each). Which run an assignment belongs to never changes once it exists, so this process may
 * remember it from the assignments it wrote or read; the run is read as this process last saw it
 * (`recent`), since a claim needs the run's fixed fields for its grant, and a remembered run that the
 * caller's `trust` does not take is read afresh. A stale run is harmless: the run's end settles the
 * assignment by compare-and-set, which orders it against the claim's.
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

  /** Starts reading the run of `assignmentId` now (as this process last saw it, if it did) if it is known. */
  start(assignmentId: string): RunRead {
    const knownRunId = this.runOfAssignment.get(assignmentId);
    const early = knownRunId === undefined ? undefined : this.runs.recent(knownRunId);
    // The caller may return before asking for it (an offline executor, say): never an unhandled rejection.
    early?.catch(() => undefined);
    return {
      of: async (assignment, trust) => {
        this.remember(assignment.assignment_id, assignment.run_id);
        const run = await (early && knownRunId === assignment.run_id ? early : this.runs.recent(assignment.run_id));
        return this.runs.confirm(assignment.run_id, run, trust);
      },
    };
  }
}
