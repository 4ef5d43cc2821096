import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, RequestError, TimeoutError, type NatsConnection } from "@nats-io/transport-node";
import { skipSettledRequestErrors } from "../../src/nats/settled-requests.js";
import { startTestNats, type TestNats } from "../helpers/nats.js";

/**
 * nats-core's errors module as its request code reads it (`new errors_1.RequestError(...)`, looked up
 * at each use), so that a counting subclass put in its place sees every error a request builds.
 */
const require = createRequire(import.meta.url);
const errorsModule = require(join(dirname(require.resolve("@nats-io/nats-core/internal")), "errors.js")) as { RequestError: typeof RequestError };

/** How many `RequestError`s nats-core built while `step` ran. */
async function requestErrorsBuilt(step: () => Promise<void>): Promise<number> {
  const original = errorsModule.RequestError;
  let built = 0;
  errorsModule.RequestError = class extends original {
    constructor(...args: ConstructorParameters<typeof original>) {
      super(...args);
      built++;
    }
  };
  try {
    await step();
  } finally {
    errorsModule.RequestError = original;
  }
  return built;
}

describe("skipSettledRequestErrors: no error built for a request that was answered", () => {
  let nats: TestNats;
  let nc: NatsConnection;

  beforeAll(async () => {
    nats = await startTestNats();
    nc = await connect({ servers: nats.url, noAsyncTraces: true });
    nc.subscribe("echo", { callback: (_err, m) => void m.respond(m.data) });
    nc.subscribe("silent", { callback: () => undefined });
    await nc.flush();
  });

  afterAll(async () => {
    await nc?.close();
    await nats?.stop();
  });

  const answered = async (n: number) => {
    for (let i = 0; i < n; i++) expect((await nc.request("echo", `m${i}`, { timeout: 2_000 })).string()).toBe(`m${i}`);
  };

  it("builds none where nats-core built one per answered request, and requests answer as before", async () => {
    // nats-core as pinned builds one per answered request: were it ever to stop, this patch could go.
    expect(await requestErrorsBuilt(() => answered(20))).toBe(20);

    expect(skipSettledRequestErrors()).toBe(true);
    expect(skipSettledRequestErrors()).toBe(true); // twice changes nothing
    expect(await requestErrorsBuilt(() => answered(20))).toBe(0);
  });

  it("still fails a request nobody answers, or that no one listens to, with its own error", async () => {
    expect(skipSettledRequestErrors()).toBe(true);
    await expect(nc.request("silent", "x", { timeout: 50 })).rejects.toBeInstanceOf(TimeoutError);
    const noResponders = await nc.request("nobody.listens", "x", { timeout: 2_000 }).catch((err: unknown) => err);
    expect(noResponders).toBeInstanceOf(RequestError);
    expect((noResponders as RequestError).isNoResponders()).toBe(true);
    expect((noResponders as Error).message).not.toBe("cancelled");
  });
});
