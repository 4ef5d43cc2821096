import type { ResponseBody } from "./operations.js";

/** One event of a run's stream, as the route declares it (times as RFC 3339). */
export type RunEvent = ResponseBody<"getRunEvents">;

/**
 * One event of a run's stream with its id: what `Last-Event-ID` (or `after`) resumes after to read
 * every later event. The stream sequence of the event's message; the events of one write stored as
 * one message share the id of the message before until the last of them, which carries its own.
 */
export interface RunEventWithId {
  id: number;
  event: RunEvent;
}

/**
 * Reads `text/event-stream` bytes into events: `id:` and `data:` lines, a blank line ends an event;
 * comments (`: heartbeat`) and `retry:` are skipped.
 */
export async function* parseEventStream(body: ReadableStream<Uint8Array>): AsyncGenerator<{ id?: string; data: string }> {
  let buffer = "";
  let id: string | undefined;
  let data: string[] = [];
  for await (const chunk of body.pipeThrough(new TextDecoderStream())) {
    buffer += chunk;
    let newline: number;
    while ((newline = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, newline).replace(/\r$/, "");
      buffer = buffer.slice(newline + 1);
      if (line === "") {
        if (data.length > 0) yield { ...(id === undefined ? {} : { id }), data: data.join("\n") };
        id = undefined;
        data = [];
      } else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      else if (line.startsWith("id:")) id = line.slice(3).trim();
    }
  }
}

/** One event's data and id, as the gateway validated it before sending; one without an id keeps `lastId`, as a browser's `EventSource` does. */
export function toRunEvent(raw: { id?: string; data: string }, lastId: number): RunEventWithId {
  return { id: raw.id === undefined ? lastId : Number(raw.id), event: JSON.parse(raw.data) as RunEvent };
}
