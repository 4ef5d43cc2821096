import type { ControlChannel } from "../transport/control-channel.js";
import type { ExecutorDetacher } from "./executor-detach.js";
import type { DetachedClaims } from "../../wire/messages.js";
import type { PresenceService } from "../claims/presence.js";

/**
 * An operator detaches an executor (`POST /v1/executors/{id}:detach`): it counts as gone at once, so
 * its claims return to the candidates and its confirmed work is settled by the detach edges, and it
 * is told to stop pulling. Idempotent: a second detach finds nothing left to move.
 */
export class OperatorDetach {
  constructor(
    private readonly presence: PresenceService,
    private readonly detacher: ExecutorDetacher,
    private readonly control: ControlChannel,
  ) {}

  async detach(scope: string, executorId: string): Promise<DetachedClaims> {
    // First: from now on its claims are refused, so nothing new reaches it while its holdings move.
    await this.presence.markDetached(scope, executorId);
    const result = await this.detacher.detach(scope, executorId, "gone");
    await this.control.tell(scope, executorId, { type: "detach_requested", executor_id: executorId });
    return result;
  }
}
