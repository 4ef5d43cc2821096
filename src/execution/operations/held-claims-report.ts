import { confirmedRefusal, type RegistryReader, type RequestOrigin } from "../../executors/admission.js";
import type { HeldClaimsReply, HeldClaimsReport } from "../../wire/messages.js";
import type { ExecutorDetacher } from "./executor-detach.js";

/**
 * An executor's held-claims report (`tg.held`), sent when it starts and before it pulls: every claim
 * its store still holds. Any other claim the gateway holds under its id was made by an earlier life
 * of it that the store no longer remembers (a lost disk, or a claim whose confirmation was sent before
 * it was made durable), so nobody will finish it: it is detached as if the executor had left
 * (`ExecutorDetacher`, mode `forgotten`). Without the report such a claim stays `running` for as long
 * as the executor's id is present.
 *
 * Only a registered executor, in its scope and from one of its nkeys, may report (the same admission
 * as a heartbeat's, without bindings). A report sent twice detaches nothing the second time.
 */
export class HeldClaimsReports {
  constructor(
    private readonly registry: RegistryReader,
    private readonly detacher: ExecutorDetacher,
  ) {}

  async report(origin: RequestOrigin, report: HeldClaimsReport): Promise<HeldClaimsReply> {
    if (report.scope !== origin.scope)
      return { status: "refused", code: "malformed", reason: `report for scope '${report.scope}' sent on the subject of scope '${origin.scope}'` };
    const refusal = await confirmedRefusal(this.registry, await this.registry.get(origin.executorId), origin, []);
    if (refusal) return { status: "refused", ...refusal };
    const held = new Set(report.held.map((h) => claimKey(h.assignment_id, h.generation)));
    const detached = await this.detacher.detach(origin.scope, origin.executorId, "forgotten", (a) => held.has(claimKey(a.assignment_id, a.generation)));
    return { status: "ok", ...detached };
  }
}

function claimKey(assignmentId: string, generation: number): string {
  return `${assignmentId}:${generation}`;
}
