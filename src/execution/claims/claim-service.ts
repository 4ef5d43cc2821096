import { setTimeout as delay } from "node:timers/promises";
import type { ClaimReply, ClaimRequest, Grant, RefusalCode } from "../../wire/messages.js";
import { nextAssignmentState, type AssignmentState } from "../model/assignment-states.js";
import { confirmedRefusal, type RegistryReader, type RequestOrigin } from "../../executors/admission.js";
import { reservationValid, type ClaimQuota } from "./claim-quota.js";
import { newClaimToken } from "./claim-token.js";
import type { PresenceService } from "./presence.js";
import type { ReceiptLog } from "../receipts/receipt-log.js";
import type { AssignmentRecord, ClaimRecord, HeldClaim } from "../model/records.js";
import { requeued } from "../dispatch/requeue.js";
import type { RunLookup } from "../runs/run-lookup.js";
import { runListsWork, runTakesWork } from "../model/run-states.js";
import type { Versioned, VersionedStore } from "../../kv/versioned-store.js";
import type { Watchlist } from "./watchlist.js";
import type { Dispatcher } from "../dispatch/dispatcher.js";

/**
 * A claim this long before its offer's standing watch comes due relies on that watch: a sweeper
 * visiting the watch meanwhile (it moves it later) is then far enough off not to race the claim.
 */
const STANDING_WATCH_MARGIN_MS = 2_000;

/**
 * A candidate can be stored before its assignment (two streams, each stored on its own): a claim
 * that finds no assignment looks once more this much later before refusing `not_found`.
 */
const NOT_FOUND_RECHECK_MS = 50;

/** Why a claim on an assignment in a given state is refused (the table has no `claim` edge from it). */
const REFUSAL_BY_STATE: Readonly<Partial<Record<AssignmentState, RefusalCode>>> = {
  withdrawn: "withdrawn",
  revoked: "claim_revoked",
  abandoned: "run_terminated",
};

const refused = (code: RefusalCode, reason: string): ClaimReply => ({ status: "refused", code, reason });

/** Whether the assignment waits for a claim at the candidate's generation. */
const offered = (a: AssignmentRecord, generation: number): boolean => a.state === "pending" && a.generation === generation;

/**
 * The unique claim: an online executor the registry grants the binding (`admissionRefusal`:
 * registered, in the subject's scope, from its own nkey, the binding in its registered list; never
 * what its heartbeat declares) moves `pending -> claimed` by compare-and-set; of any number of
 * concurrent claimers exactly one wins and gets the grant with a fresh claim token (only its sha256
 * is stored). The claim is leased: unconfirmed, it expires.
 * An executor holding its maximum of claims is refused (`too_many_claims`, see `ClaimQuota`).
 * Registration and presence come from this process's views of their buckets (no request to NATS);
 * a refusal either would give is confirmed on the bucket first.
 */
export class ClaimService {
  constructor(
    private readonly runs: RunLookup,
    private readonly assignments: VersionedStore<AssignmentRecord>,
    private readonly registry: RegistryReader,
    private readonly presence: PresenceService,
    private readonly watchlist: Watchlist,
    private readonly offers: Pick<Dispatcher, "standingWatchDue" | "dispatch" | "ensureListed" | "withdrawUnlisted" | "creationWritten">,
    private readonly quota: ClaimQuota,
    private readonly receipts: ReceiptLog,
    private readonly leaseMs: number,
    /** How soon after a claim a sweeper first checks on it (then on its holder's presence, once confirmed). */
    private readonly holderCheckMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  async claim(origin: RequestOrigin, req: ClaimRequest): Promise<ClaimReply> {
    const { scope } = origin;
    // The candidate of a call this process is creating can arrive before the call's write is answered.
    await this.offers.creationWritten(req.assignment_id);
    // Independent reads, all needed by every claim that can succeed: read together.
    const runRead = this.runs.start(req.assignment_id);
    // What this process remembers of the assignment (it made or offered it, say) only starts the
    // compare-and-set below; a remembered state that would refuse the claim is read afresh first.
    const [registered, online, recent, holdings] = await Promise.all([
      this.registry.get(req.executor_id),
      this.presence.online(scope, req.executor_id),
      this.assignments.recent(req.assignment_id, (a) => offered(a, req.generation)),
      this.quota.read(scope, req.executor_id),
    ]);
    const unadmitted = await confirmedRefusal(this.registry, registered, origin, []);
    if (unadmitted) return refused(unadmitted.code, unadmitted.reason);
    if (!online) return refused("executor_offline", `executor '${req.executor_id}' has no live presence in scope '${scope}': send a heartbeat first`);
    const found = recent ?? (await this.lookAgain(req.assignment_id));
    if (!found) return refused("not_found", `assignment '${req.assignment_id}' does not exist`);
    const a = found.value;
    if (a.scope !== scope) return refused("out_of_scope", `binding '${a.binding_id}' is not served in scope '${scope}'`);
    const notGranted = await confirmedRefusal(this.registry, registered, origin, [a.binding_id]);
    if (notGranted) return refused(notGranted.code, notGranted.reason);
    // A state the run's end put it in answers for itself (`withdrawn`, `claim_revoked`), before the run does.
    const ended = REFUSAL_BY_STATE[a.state];
    if (ended) return refused(ended, `assignment is ${a.state}`);
    // A remembered run that would refuse the claim is read afresh first.
    const run = await runRead.of(a, (remembered) => runTakesWork(a, remembered));
    if (!run || !runTakesWork(a, run.value)) {
      // A call its ended run never listed (its creation was cut short): the end did not reach it.
      if (run && !runListsWork(a, run.value)) return this.endedUnlisted(a);
      return refused("run_terminated", `run '${a.run_id}' has ended`);
    }
    // Plainly lost already: refused without taking a slot (the compare-and-set below still decides).
    if (!offered(a, req.generation)) return this.lost(a, req);

    const { token, sha256 } = newClaimToken();
    const claimedAt = this.now();
    const leaseExpiresAt = claimedAt + this.leaseMs;
    // Watched before the compare-and-set: if this process dies right after winning, a sweeper still
    // expires the lease. The same watch, due no later than the first holder check, looks after the
    // work once it is confirmed (nothing is written on `accepted`). The offer's own watch does that
    // when it comes due first (a claim soon after the tool call was made): then none is written.
    const checkAt = Math.min(leaseExpiresAt, claimedAt + this.holderCheckMs);
    const standing = this.offers.standingWatchDue(a);
    const watched = standing !== null && claimedAt + STANDING_WATCH_MARGIN_MS < standing && standing <= checkAt;
    const reservation: HeldClaim = { assignment_id: a.assignment_id, generation: a.generation, reserved_at: claimedAt };
    const claimRecord = {
      executor_id: req.executor_id,
      generation: a.generation,
      token_sha256: sha256,
      claimed_at: claimedAt,
      lease_expires_at: leaseExpiresAt,
    };
    const reserved = () => this.quota.reserve(scope, req.executor_id, reservation, holdings);
    const take = () => this.take(found, req, claimRecord, reservation);
    const watch = async () => {
      if (!watched) await this.watchlist.watch(a.assignment_id, checkAt);
    };
    // Its creation lists a call beside offering it (or died in between): no grant leaves before the
    // run lists the call, so the run's end, which settles exactly the calls listed, reaches every
    // call ever granted. Checked beside the claim's own writes (a read when this process has not
    // seen the listing; a write only if the call is not listed yet).
    const listing = this.offers.ensureListed(a, run.value);
    let outcome: Awaited<ReturnType<typeof take>>;
    if (this.quota.likelyRoom(scope, req.executor_id, holdings)) {
      // Room as far as this process knows: the slot is written beside the watch and the claim, one
      // round trip less. Should the slot be refused after all (another replica filled the record),
      // the claim just won is given back at once, before anyone saw its grant.
      const [slot, took] = await Promise.all([reserved(), watch().then(take), listing]);
      if (!slot) {
        if (took && !took.result) await this.giveBack(took.value, sha256);
        return this.tooMany(req.executor_id);
      }
      outcome = took;
    } else {
      // At its bound as far as this process knows: refused before the assignment is touched, so an
      // executor at its bound cannot take claims away from the others even for a moment.
      const [slot, listed] = await Promise.all([reserved(), listing, watch()]);
      if (!slot) return this.tooMany(req.executor_id);
      if (listed === "run_ended") return this.endedUnlisted(a);
      outcome = await take();
    }
    if (!outcome) return refused("not_found", `assignment '${req.assignment_id}' does not exist`);
    if ((await listing) === "run_ended") {
      // The run's end was recorded before the call was listed: the claim just won is given back first.
      if (!outcome.result) await this.giveBack(outcome.value, sha256, false);
      return this.endedUnlisted(a);
    }
    if (outcome.result) return outcome.result;

    const granted = outcome.value;
    const compensates = granted.compensates === null ? undefined : await this.undoing(granted.compensates);
    return {
      status: "granted",
      grant: {
        assignment_id: granted.assignment_id,
        run_id: granted.run_id,
        session_id: run.value.session_id,
        executor_id: req.executor_id,
        tool_name: granted.tool_name,
        binding_id: granted.binding_id,
        tool_kind: granted.tool_kind,
        arguments: granted.arguments,
        argument_digest: granted.argument_digest,
        subject: run.value.subject,
        agent: run.value.agent,
        agent_version: run.value.agent_version,
        toolset: run.value.toolset,
        toolset_version: run.value.toolset_version,
        operation_key: granted.operation_key,
        claim_token: token,
        generation: granted.generation,
        lease_expires_at: leaseExpiresAt,
        ...(compensates ? { compensates } : {}),
      },
    };
  }

  /** An assignment not found: read once more a moment later, in case its candidate was stored first. */
  private async lookAgain(assignmentId: string) {
    await delay(NOT_FOUND_RECHECK_MS);
    return this.assignments.recent(assignmentId);
  }

  /** The compare-and-set `pending -> claimed` at the candidate's generation: null result when won. */
  private take(found: Versioned<AssignmentRecord>, req: ClaimRequest, claim: ClaimRecord, reservation: HeldClaim) {
    return this.assignments.mutate(
      found.value.assignment_id,
      (cur) => {
        const to = nextAssignmentState(cur.state, "claim");
        if (!to || cur.generation !== req.generation) return { result: this.lost(cur, req) };
        // A slot another replica may already have reconciled away must not be filled (the bound would overshoot).
        if (!reservationValid(reservation, this.now())) return { result: refused("too_many_claims", "the claim took too long to be made; claim again") };
        return { write: { ...cur, state: to, claim, updated_at: claim.claimed_at }, result: null };
      },
      found,
    );
  }

  /**
   * A claim won that must not be granted (its slot was refused, or its run ended before listing the
   * call): back to pending, next generation, its grant never sent; offered again unless `offer` is false.
   */
  private async giveBack(a: AssignmentRecord, tokenSha256: string, offer = true): Promise<void> {
    const res = await this.assignments.mutate(a.assignment_id, (cur) => {
      const next = cur.state === "claimed" && cur.claim?.token_sha256 === tokenSha256 ? requeued(cur, "release", this.now()) : undefined;
      return next ? { write: next, result: undefined } : { result: undefined };
    });
    if (res?.written && offer) await this.offers.dispatch(a.assignment_id);
  }

  /** A call whose run's end was recorded before it was listed: the end does not reach it, so it is withdrawn here. */
  private async endedUnlisted(a: AssignmentRecord): Promise<ClaimReply> {
    await this.offers.withdrawUnlisted(a.assignment_id);
    return refused("run_terminated", `run '${a.run_id}' has ended`);
  }

  private tooMany(executorId: string): ClaimReply {
    return refused("too_many_claims", `executor '${executorId}' already holds ${this.quota.maxPerExecutor} claims: finish one, then claim again`);
  }

  /** The refusal for a claim on an assignment that is no longer offered at the candidate's generation. */
  private lost(a: AssignmentRecord, req: ClaimRequest): ClaimReply {
    if (!nextAssignmentState(a.state, "claim")) return refused(REFUSAL_BY_STATE[a.state] ?? "already_claimed", `assignment is ${a.state}`);
    return refused("stale_generation", `the candidate is of generation ${req.generation}, the assignment is at ${a.generation}`);
  }

  /** What a compensation's handler needs of the write it undoes: its id, operation key and completed result. */
  private async undoing(originalId: string): Promise<NonNullable<Grant["compensates"]>> {
    const original = (await this.assignments.get(originalId))?.value;
    if (!original?.final || original.state !== "completed") throw new Error(`the original '${originalId}' of a compensation is not a completed assignment`);
    return {
      assignment_id: original.assignment_id,
      operation_key: original.operation_key,
      result: await this.receipts.completedResult(original.final),
    };
  }
}
