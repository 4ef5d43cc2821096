import type { MsgHdrs } from "@nats-io/transport-node";

/** Header carrying the protocol version an executor speaks (the ToolRunner sends it on every request and receipt). */
export const PROTOCOL_VERSION_HEADER = "Tg-Protocol";
export const PROTOCOL_VERSION = "1";

/**
 * Why a message's protocol version is one this gateway does not speak, or undefined when it speaks it.
 * A message without the header is taken as this version: executors written by hand against
 * docs/protocol.md, and runners older than the header, send none.
 */
export function unsupportedProtocolVersion(headers: MsgHdrs | undefined): string | undefined {
  if (!headers?.has(PROTOCOL_VERSION_HEADER)) return undefined;
  const version = headers.get(PROTOCOL_VERSION_HEADER);
  return version === PROTOCOL_VERSION
    ? undefined
    : `protocol version '${version}' is not supported; this gateway speaks ${PROTOCOL_VERSION_HEADER}: ${PROTOCOL_VERSION}`;
}
