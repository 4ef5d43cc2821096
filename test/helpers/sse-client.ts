import { until } from "./until.js";

/** One event as a client received it: `id` is the last id the stream sent, as a browser's `lastEventId`; `ownId` says whether this event carried it. */
export interface ReceivedEvent {
  id: number;
  ownId: boolean;
  data: any;
}

/**
 * A minimal Server-Sent Events client over fetch (what a browser's EventSource does, plus the
 * Authorization header EventSource cannot send). Events and heartbeat comments are collected as they
 * arrive; `close()` drops the connection like a closed tab.
 */
export class SseClient {
  readonly events: ReceivedEvent[] = [];
  heartbeats = 0;
  status = 0;
  private lastId = 0;
  private readonly abort = new AbortController();
  private done!: Promise<void>;

  private constructor() {}

  static async open(url: string, headers: Record<string, string>): Promise<SseClient> {
    const client = new SseClient();
    // A resuming browser's lastEventId is the id it resumes after, until an event brings another.
    client.lastId = Number(headers["last-event-id"] ?? 0);
    const res = await fetch(url, { headers, signal: client.abort.signal });
    client.status = res.status;
    if (!res.ok || !res.body) {
      client.done = Promise.resolve();
      return client;
    }
    client.done = client.read(res.body);
    return client;
  }

  /** Waits (bounded) until `predicate` holds for the events received so far. */
  until(what: string, predicate: (events: ReceivedEvent[]) => boolean, timeoutMs = 15_000): Promise<ReceivedEvent[]> {
    return until(
      what,
      () => {
        if (predicate(this.events)) return this.events;
        throw new Error(`got ${JSON.stringify(this.events.map((e) => [e.id, e.data.type, e.data.to ?? e.data.state]))}`);
      },
      timeoutMs,
      20,
    );
  }

  async close(): Promise<void> {
    this.abort.abort();
    await this.done;
  }

  private async read(body: ReadableStream<Uint8Array>): Promise<void> {
    const decoder = new TextDecoder();
    let buffer = "";
    try {
      for await (const chunk of body) {
        buffer += decoder.decode(chunk, { stream: true });
        for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
          this.frame(buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
        }
      }
    } catch (err) {
      if (!this.abort.signal.aborted) throw err;
    }
  }

  private frame(text: string): void {
    let id: number | undefined;
    let data: string | undefined;
    for (const line of text.split("\n")) {
      if (line.startsWith(":")) this.heartbeats++;
      else if (line.startsWith("id: ")) id = Number(line.slice(4));
      else if (line.startsWith("data: ")) data = line.slice(6);
    }
    if (data === undefined) return;
    if (id !== undefined) this.lastId = id;
    this.events.push({ id: this.lastId, ownId: id !== undefined, data: JSON.parse(data) });
  }
}
