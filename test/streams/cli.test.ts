import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestNats, type TestNats } from "../helpers/nats.js";
import { runCli } from "../helpers/serve.js";

describe("toolgate streams apply (CLI)", () => {
  let nats: TestNats;
  let dir: string;
  const cli = (...args: string[]) =>
    runCli(["streams", "apply", "--dir", dir, ...args], { NATS_URL: nats.url }).then((r) => ({ code: r.code, stdout: r.stdout }));
  const declare = (retention: string) =>
    writeFileSync(join(dir, "stream.t.json"), JSON.stringify({ kind: "stream", name: "T_CLI", subjects: ["t.cli.>"], retention }));

  beforeAll(async () => {
    nats = await startTestNats();
    dir = mkdtempSync(join(tmpdir(), "toolgate-streams-"));
  });
  afterAll(async () => {
    await nats?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("prints the plan, applies, is a no-op the second time, and refuses a destructive change without --force", async () => {
    declare("limits");
    expect(await cli("--dry-run")).toEqual({ code: 0, stdout: "+ create stream T_CLI\ndry run: nothing applied\n" });
    expect((await cli()).stdout).toContain("done: create stream T_CLI");
    expect(await cli()).toEqual({ code: 0, stdout: "= unchanged stream T_CLI\nstreams: up to date\n" });
    declare("workqueue");
    const refused = await cli();
    expect(refused.code).toBe(1);
    expect(refused.stdout).toContain('! recreate stream T_CLI: retention "limits" -> "workqueue" (recreate)');
    expect(refused.stdout).toContain("re-run with --force");
    expect((await cli("--force")).stdout).toContain("done: recreate stream T_CLI");
    expect((await cli("--replicas", "9")).code).toBe(2);
  });
});
