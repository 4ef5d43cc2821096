import type { FastifyReply } from "fastify";
import type { z } from "zod";
import { toJsonText } from "../budget/index.js";

/** One Server-Sent Event: `id:` (when it has one; a client keeps the last id it read) and one `data:` line of JSON. */
export interface SseEvent {
  id?: string;
  data: unknown;
}

/**
 * What a `stream: "sse"` route's handler returns: its events, ended by the request's `signal` (the
 * client went away), with a heartbeat comment whenever nothing else was written for `heartbeatMs`.
 */
export class EventStream {
  constructor(
    readonly events: AsyncIterable<SseEvent>,
    readonly heartbeatMs: number,
  ) {}
}

/** Browsers reconnect after this long when the connection drops (the SSE `retry:` field). */
const RETRY_MS = 2_000;

/**
 * Writes the stream as `text/event-stream` (each event's data validated by the route's response
 * schema) until the events end or the client disconnects. There is no `event:` field: the JSON's
 * `type` says what it is, and every event reaches a browser's `onmessage`.
 */
export async function sendEventStream(reply: FastifyReply, stream: EventStream, schema: z.ZodType): Promise<void> {
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", connection: "keep-alive", "x-accel-buffering": "no" });
  const write = async (text: string): Promise<void> => {
    if (res.destroyed) return;
    if (!res.write(text)) await new Promise<void>((resolve) => res.once("drain", resolve).once("close", resolve));
  };
  let last = Date.now();
  const beat = setInterval(
    () => {
      if (Date.now() - last >= stream.heartbeatMs) void write(": heartbeat\n\n");
    },
    Math.max(10, Math.floor(stream.heartbeatMs / 2)),
  );
  try {
    await write(`retry: ${RETRY_MS}\n\n`);
    for await (const event of stream.events) {
      const id = event.id === undefined ? "" : `id: ${event.id}\n`;
      await write(`${id}data: ${toJsonText(schema.parse(event.data))}\n\n`);
      last = Date.now();
    }
  } finally {
    clearInterval(beat);
    res.end();
  }
}
