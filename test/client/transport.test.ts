import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { GatewayError, ToolgateClient } from "../../src/client/index.js";

/**
 * The client's retry and resume rules against a scripted HTTP server (a real socket): which answers
 * are retried, how often, with which headers, and what a dropped event stream resumes from.
 */
describe("toolgate/client transport", () => {
  let server: Server | undefined;
  afterEach(async () => {
    server?.closeAllConnections();
    await new Promise((done) => server?.close(done) ?? done(undefined));
  });

  async function serve(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<ToolgateClient> {
    server = createServer(handler);
    await new Promise<void>((done) => server!.listen(0, "127.0.0.1", done));
    const { port } = server.address() as AddressInfo;
    return new ToolgateClient({ baseUrl: `http://127.0.0.1:${port}`, apiKey: "k", retry: { initialDelayMs: 1, retries: 3 } });
  }
  const error = (res: ServerResponse, status: number, code: string, headers: Record<string, string> = {}) =>
    res.writeHead(status, { "content-type": "application/json", ...headers }).end(JSON.stringify({ error: { code, message: code } }));

  it("retries 503 and 429 (Retry-After honoured) until answered, and gives up after the retries", async () => {
    const seen: string[] = [];
    const client = await serve((req, res) => {
      seen.push(req.url!);
      if (seen.length === 1) return error(res, 503, "not_ready", { "retry-after": "0" });
      if (seen.length === 2) return error(res, 429, "rate_limited", { "retry-after": "0" });
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ run_id: "r1" }));
    });
    expect(await client.getRun("r1")).toEqual({ run_id: "r1" });
    expect(seen).toEqual(["/v1/runs/r1", "/v1/runs/r1", "/v1/runs/r1"]);

    seen.length = 0;
    server!.removeAllListeners("request").on("request", (req: IncomingMessage, res: ServerResponse) => {
      seen.push(req.url!);
      error(res, 503, "not_ready");
    });
    await expect(client.getRun("r1")).rejects.toMatchObject({ status: 503, code: "not_ready" });
    expect(seen).toHaveLength(4); // the first attempt and three retries
  });

  it("does not retry any other refusal", async () => {
    let requests = 0;
    const client = await serve((_req, res) => {
      requests++;
      error(res, 500, "internal");
    });
    const refused = await client.getRun("r1").catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(GatewayError);
    expect(refused).toMatchObject({ status: 500, code: "internal" });
    expect(requests).toBe(1);
  });

  it("resumes a dropped event stream with Last-Event-ID: no event missed or repeated", async () => {
    const resumedFrom: string[] = [];
    const event = (id: number) => `id: ${id}\ndata: ${JSON.stringify({ type: "run", run_id: "r1", state: "active", at: id })}\n\n`;
    const client = await serve((req, res) => {
      const from = Number(req.headers["last-event-id"]);
      resumedFrom.push(String(from));
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(`retry: 2000\n\n: heartbeat\n\n`);
      res.end(event(from + 1) + event(from + 2)); // two events, then the connection drops
    });
    const ids: number[] = [];
    for await (const { id, event } of client.runEvents("r1")) {
      expect(event.type).toBe("run");
      ids.push(id);
      if (ids.length === 5) break;
    }
    expect(ids).toEqual([1, 2, 3, 4, 5]);
    expect(resumedFrom).toEqual(["0", "2", "4"]);
  });

  it("resumes a stream dropped inside a message (events of one write, the last with the id) without repeating what it read", async () => {
    // Message 1 holds three events (ids on the last only), message 2 one. The first connection drops
    // after two events of message 1; resumed after 0 it sends message 1 again from its start.
    const event = (at: number, id?: number) =>
      `${id === undefined ? "" : `id: ${id}\n`}data: ${JSON.stringify({ type: "run", run_id: "r1", state: "active", at })}\n\n`;
    const resumedFrom: string[] = [];
    const client = await serve((req, res) => {
      resumedFrom.push(String(req.headers["last-event-id"]));
      res.writeHead(200, { "content-type": "text/event-stream" });
      if (resumedFrom.length === 1) return res.end(event(1) + event(2));
      res.write(event(1) + event(2) + event(3, 1) + event(4, 2));
    });
    const read: Array<[number, number]> = [];
    for await (const { id, event } of client.runEvents("r1")) {
      read.push([event.type === "run" ? event.at : -1, id].map(Number) as [number, number]);
      if (read.length === 4) break;
    }
    // Each event once, in order; an event before its message's last carries the id to resume after.
    expect(read).toEqual([
      [1, 0],
      [2, 0],
      [3, 1],
      [4, 2],
    ]);
    expect(resumedFrom).toEqual(["0", "0"]);
  });
});
