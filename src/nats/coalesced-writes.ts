import type { NatsConnection } from "@nats-io/transport-node";

/** The part of nats-core's protocol handler this module reaches into (a private method in its types). */
interface FlushingProtocol {
  flushPending(): void;
  close(err?: Error): Promise<void>;
}

const installed = new WeakSet<object>();

/**
 * Makes the client write its socket once per turn of the event loop instead of once per microtask
 * checkpoint. nats-core flushes its outbound buffer in a microtask queued by the first command after
 * a flush, so a process answering many messages at once (a gateway under load: each receipt, claim
 * and KV request continues in its own microtasks) makes one `write` system call for every few
 * commands; deferred to `setImmediate`, the commands of one turn leave in one write. Nothing is sent
 * later than the end of the current turn, so an idle process's latency does not change.
 *
 * It replaces a private method of `@nats-io/nats-core` (pinned in package-lock.json): on a client
 * that lacks it, nothing is changed and the function says so by returning false. The connection's
 * reconnects keep it (the protocol handler outlives its transports); closing it first sends what
 * is still waiting for the turn to end (a last publish before `close()` is not lost).
 */
export function coalesceWrites(nc: NatsConnection): boolean {
  const protocol = (nc as unknown as { protocol?: Partial<FlushingProtocol> }).protocol;
  if (!protocol || typeof protocol.flushPending !== "function" || typeof protocol.close !== "function") return false;
  if (installed.has(protocol)) return true;
  const flushNow = protocol.flushPending.bind(protocol);
  const close = protocol.close.bind(protocol);
  let scheduled = false;
  protocol.flushPending = () => {
    if (scheduled) return;
    scheduled = true;
    setImmediate(() => {
      scheduled = false;
      flushNow();
    });
  };
  protocol.close = (err?: Error) => {
    flushNow();
    return close(err);
  };
  installed.add(protocol);
  return true;
}
