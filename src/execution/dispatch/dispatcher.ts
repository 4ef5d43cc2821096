import { nextAssignmentState } from "../model/assignment-states.js";
import type { CandidateQueue } from "./candidate-queue.js";
import type { AssignmentRecord, RunRecord } from "../model/records.js";
import { runIsOpen, runListsWork } from "../model/run-states.js";
import type { Versioned, VersionedStore } from "../../kv/versioned-store.js";
import type { Watchlist } from "../claims/watchlist.js";

/** Whether a run lists a call: `run_ended` once the run's end was recorded without it. */
type Listing = "listed" | "run_ended";

/** A creation of this process between its first writes and its listing. */
interface Creation {
  /** Settled once the assignment's write is answered. */
  written: Promise<unknown>;
  /** What its listing decided; null if it did not get there (it failed, or lost to another request). */
  listing: Promise<Listing | null>;
}

/**
 * Puts a pending assignment in front of executors: lists it on its run (refused once the run's end is recorded,
 * which withdraws it instead) and publishes the candidate of its current generation. Every step is
 * idempotent, so the request that created the assignment and any sweeper finishing a half-done
 * creation or returning an expired claim can all call it, in any number and order.
 */
export class Dispatcher {
  /** This process's creations between their first writes and their listing. */
  private readonly creating = new Map<string, Creation>();

  constructor(
    private readonly runs: VersionedStore<RunRecord>,
    private readonly assignments: VersionedStore<AssignmentRecord>,
    private readonly candidates: CandidateQueue,
    private readonly watchlist: Watchlist,
    /** How often a sweeper looks at an offered candidate; one taken but not claimed is offered again. */
    private readonly reofferAfterMs: number,
    /** How long after creation a sweeper takes over a dispatch that did not finish (the request's process died). */
    private readonly dispatchGraceMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * A new tool call, its creation watch already written: the assignment and its candidate are written
   * together (the candidate can be taken one round trip sooner), then the call is listed on its run.
   * A claim finds its run listing the call, or waits for this listing (`ensureListed`), or lists it
   * itself, before any grant, so no claim is granted on a call its run's end could miss; should the
   * listing be refused (the run ended first), the call is withdrawn and its candidate taken back.
   * The candidate can be stored before its assignment (two streams, each stored by its own
   * server routine): a claim waits for the write of a creation of its own process
   * (`creationWritten`), and one on another gateway that finds no assignment looks once more. A
   * candidate whose assignment's write failed finds none (its claim is refused `not_found`), and
   * the creation watch, written before both, looks after whatever was written; one
   * of a creation that lost to another request for the same call is that request's own message
   * again (`Nats-Msg-Id`), which the stream drops. The creation watch also stands as the re-offer
   * watch, so none is written here.
   */
  async create(
    record: AssignmentRecord,
    run: Versioned<RunRecord>,
    /** The record's encoding, when the caller made it already (to measure it). */
    encoded?: Uint8Array,
  ): Promise<{ created: true; assignment: AssignmentRecord | null } | { created: false; existing: Versioned<AssignmentRecord> }> {
    const id = record.assignment_id;
    const write = this.assignments.create(id, record, encoded);
    // Its PubAck is not waited for: the creation watch offers the call again if the candidate never lands.
    const offered = Promise.all([write, this.offer(record, { confirmed: false })]);
    const listing = offered.then(([res]) => (res.created ? this.list(record, run) : null));
    // A creation that fails or loses lists nothing: a claim waiting on it lists the call itself.
    this.creating.set(id, { written: write.catch(() => undefined), listing: listing.catch(() => null) });
    try {
      const [res] = await offered;
      if (!res.created) return res;
      return { created: true, assignment: (await listing) === "listed" ? record : await this.withdrawUnlisted(id) };
    } finally {
      this.creating.delete(id);
    }
  }

  /**
   * Returns the assignment as it stands afterwards (null if it does not exist): a dispatch taken up
   * again (a retried request, a sweeper finishing a creation or returning a call to the candidates).
   */
  async dispatch(assignmentId: string): Promise<AssignmentRecord | null> {
    const current = await this.assignments.get(assignmentId);
    if (!current || current.value.state !== "pending") return current?.value ?? null;
    const a = current.value;
    if ((await this.list(a)) !== "listed") return this.withdrawUnlisted(assignmentId);
    // Offered by an earlier version, which wrote the candidate's sequence into the assignment.
    if (a.candidate_seq !== null) return a;
    // A dispatch taken up again (a retried request, a sweeper) finds the candidate by its subject: one
    // of this generation still in the stream is not offered twice. (One already taken is published
    // again under the same `Nats-Msg-Id`, which the stream drops within its de-duplication window.)
    if ((await this.candidates.find(a))?.candidate.generation === a.generation) return a;
    // Watched before it can be taken: should the executor that takes it vanish without claiming, a
    // sweeper offers it again. A first offer keeps its creation's due time (see `standingWatchDue`).
    await this.watchlist.watch(assignmentId, a.generation === 0 ? Math.max(this.now(), this.creationDue(a.created_at)) : this.now() + this.reofferAfterMs);
    await this.offer(a);
    return a;
  }

  /**
   * Lists a pending assignment on its run (a compensation hangs off its original instead: nothing to
   * list). `run_ended` once the run's end is recorded: its list is fixed then, the end settles
   * exactly the assignments listed. `known` starts the compare-and-set; a stale one only retries it.
   */
  private async list(a: AssignmentRecord, known?: Versioned<RunRecord>): Promise<Listing> {
    if (a.compensates !== null) return "listed";
    const listing = await this.runs.mutate(
      a.run_id,
      (run) => {
        if (runListsWork(a, run)) return { result: "listed" as const };
        if (!runIsOpen(run)) return { result: "run_ended" as const };
        return { write: { ...run, assignment_ids: [...run.assignment_ids, a.assignment_id] }, result: "listed" as const };
      },
      known,
    );
    return listing?.result ?? "run_ended";
  }

  /**
   * Whether the run lists the call, listing it if not: a claim's check, since a creation lists its
   * call after offering it (or died in between). `run` is the run as the caller has it. A creation
   * of this process still listing the call is waited for (not raced with a second compare-and-set);
   * one that has listed it since the caller took `run` left the run it wrote in this process's
   * memory, which answers (a listing is never undone); otherwise a run that does not list the call
   * is read afresh, and the listing written only if still missing.
   */
  async ensureListed(a: AssignmentRecord, run: RunRecord): Promise<Listing> {
    if (runListsWork(a, run)) return "listed";
    const creation = this.creating.get(a.assignment_id);
    if (creation) return (await creation.listing) ?? this.list(a);
    const remembered = this.runs.remembered(a.run_id);
    return remembered && runListsWork(a, remembered) ? "listed" : this.list(a);
  }

  /** Settled once this process's creation of the assignment has its write answered; undefined when none is under way. */
  creationWritten(assignmentId: string): Promise<unknown> | undefined {
    return this.creating.get(assignmentId)?.written;
  }

  /**
   * The candidate of the assignment's current generation. Nothing of it is written back into the
   * assignment: it is found by its subject. Should the run end meanwhile, the run's end takes the
   * candidate back, or an executor claiming it is refused `withdrawn` (also the fate of one the
   * end looked for before the stream stored it). `confirmed: false` publishes it without waiting
   * for its PubAck: a new call's, which its creation watch stands over.
   */
  private async offer(a: AssignmentRecord, { confirmed = true } = {}): Promise<void> {
    const candidate = {
      assignment_id: a.assignment_id,
      run_id: a.run_id,
      tool_name: a.tool_name,
      binding_id: a.binding_id,
      generation: a.generation,
      created_at: a.created_at,
    };
    await (confirmed ? this.candidates.publish(a.scope, candidate) : this.candidates.post(a.scope, candidate));
  }

  /**
   * The watch a creating request writes before the assignment: due when a sweeper may have to finish
   * the dispatch, and standing afterwards as the candidate's re-offer watch (see `dispatch`), so it
   * is due at the earlier of the two. Returns its revision; null when the call is watched already,
   * which only an earlier request for the same call (its `tool_call_id` asked again) can have done:
   * that watch stands for this request too (it is due no later than this one's would be).
   */
  watchCreation(assignmentId: string, createdAt: number): Promise<number | null> {
    return this.watchlist.watchUnlessWatched(assignmentId, this.creationDue(createdAt));
  }

  /**
   * When the watch standing over a first offer (generation 0) comes due: it was written before the
   * assignment with this time (by `watchCreation`, or by `dispatch` finishing a creation), and
   * nothing moves it before then. Null for a later generation, whose watch a sweeper wrote at
   * another time. A claim made well before this time needs no watch of its own (`ClaimService`).
   */
  standingWatchDue(a: Pick<AssignmentRecord, "generation" | "created_at">): number | null {
    return a.generation === 0 ? this.creationDue(a.created_at) : null;
  }

  private creationDue(createdAt: number): number {
    return createdAt + Math.min(this.dispatchGraceMs, this.reofferAfterMs);
  }

  /** Looks at a dispatched assignment again later (its candidate is still waiting for an executor). */
  async rewatch(assignmentId: string): Promise<void> {
    await this.watchlist.watch(assignmentId, this.now() + this.reofferAfterMs);
  }

  /**
   * An assignment its run never listed (the run ended first) is withdrawn, and a candidate of it
   * taken back: its creation may have offered it beside the listing.
   */
  async withdrawUnlisted(assignmentId: string): Promise<AssignmentRecord | null> {
    const res = await this.assignments.mutate(assignmentId, (cur) => {
      const to = nextAssignmentState(cur.state, "withdraw");
      return to ? { write: { ...cur, state: to, updated_at: this.now() }, result: undefined } : { result: undefined };
    });
    if (res?.value.state === "withdrawn") await this.candidates.takeBack(res.value);
    return res?.value ?? null;
  }
}
