import type { PresenceHeartbeat } from "../wire/messages.js";
import { errorText, type Logger } from "./logger.js";
import type { NatsLink } from "./nats-link.js";
import { sleep } from "./wait.js";

/**
 * This executor's presence: a heartbeat every interval (by default a third of the TTL the gateway
 * announces) and whether the gateway answered the last one `ok`. While it is not online the runner
 * claims nothing.
 */
export class Presence {
  private online = false;
  private intervalMs = 1_000;

  constructor(
    private readonly link: NatsLink,
    private readonly logger: Logger,
    /** A fixed interval (`heartbeatIntervalMs`), else from the gateway's TTL. */
    private readonly fixedIntervalMs: number | undefined,
    /** What the next heartbeat says (status, bindings, claims held). */
    private readonly heartbeat: () => PresenceHeartbeat,
    /** Called when the gateway answers `ok` (pulling may resume). */
    private readonly onOnline: () => void,
  ) {}

  get isOnline(): boolean {
    return this.online;
  }

  get interval(): number {
    return this.intervalMs;
  }

  async beat(): Promise<void> {
    try {
      const reply = await this.link.heartbeat(this.heartbeat());
      this.intervalMs = this.fixedIntervalMs ?? Math.max(100, Math.floor(reply.ttl_ms / 3));
      if (reply.status === "refused") this.logger.warn({ code: reply.code, reason: reply.reason }, "presence refused by the gateway");
      this.setOnline(reply.status === "ok");
    } catch (err) {
      // Presence is the gateway's to expire; a missed beat (NATS or gateway away) is retried next interval.
      this.logger.debug({ err: errorText(err) }, "presence heartbeat unanswered");
    }
  }

  /** Offline after a claim refusal that says so; online again only when a heartbeat is answered `ok`. */
  setOnline(online: boolean): void {
    this.online = online;
    if (online) this.onOnline();
  }

  /** Beats every interval while `beating()` holds; ends at once when `stop` aborts. */
  async loop(beating: () => boolean, stop: AbortSignal): Promise<void> {
    while (beating()) {
      await sleep(this.intervalMs, stop);
      if (beating()) await this.beat();
    }
  }
}
