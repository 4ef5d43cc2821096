import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { judgeServer, OLDEST_MAINTAINED_LINE, compareVersions } from "../../src/nats/server-version.js";
import { natsServerBinary, startNatsServer, type NatsServerProcess } from "../../src/nats/nats-server-process.js";
import { runCli, serve } from "../helpers/serve.js";
import { until } from "../helpers/until.js";

/** Debian 12's nats-server (2.9.10), the old server toolgate still runs on for one-server development. */
const DEBIAN_SERVER = "/usr/sbin/nats-server";
const versionOf = (binary: string) => /v(\d+\.\d+\.\d+)/.exec(execFileSync(binary, ["--version"], { encoding: "utf8" }))![1]!;

describe("which nats-server toolgate runs on", () => {
  const facts = (version: string, jetstream = true) => ({ version, serverName: "n1", jetstream });

  it("refuses replicated storage before 2.9.21, naming the version and how to get a current server", () => {
    const verdict = judgeServer(facts("2.9.20"), { replicas: 3 });
    expect(verdict.refusal).toContain("nats-server 2.9.20");
    expect(verdict.refusal).toContain("2.9.21");
    expect(verdict.refusal).toContain("go install github.com/nats-io/nats-server/v2@latest");
    expect(judgeServer(facts("2.9.21"), { replicas: 3 }).refusal).toBeUndefined();
    expect(judgeServer(facts("2.15.3"), { replicas: 3 })).toEqual({ warnings: [] });
  });

  it("runs one server on 2.9.10 with an end-of-life warning, and refuses what is older or lacks JetStream", () => {
    const old = judgeServer(facts("2.9.10"), { replicas: 1 });
    expect(old.refusal).toBeUndefined();
    expect(old.warnings.join()).toContain("end-of-life line");
    expect(judgeServer(facts("2.8.4"), { replicas: 1 }).refusal).toContain("older than 2.9.10");
    expect(judgeServer(facts("2.12.15", false), { replicas: 1 }).refusal).toContain("JetStream disabled");
    expect(judgeServer(facts("2.12.15"), { replicas: 1 })).toEqual({ warnings: [] });
    expect(judgeServer(facts("2.11.17"), { replicas: 1 }).warnings).toHaveLength(1);
  });

  describe("against Debian's 2.9.10", () => {
    let old: NatsServerProcess;
    beforeAll(async () => {
      old = await startNatsServer({ binary: DEBIAN_SERVER });
    });
    afterAll(async () => {
      await old?.stop();
    });

    it("`streams apply --replicas 3` stops with the reason and creates nothing", async () => {
      const result = await runCli(["streams", "apply", "--replicas", "3"], { NATS_URL: old.url });
      expect(result.code).toBe(1);
      expect(result.stderr).toContain(`nats-server ${versionOf(DEBIAN_SERVER)}`);
      expect(result.stderr).toContain("nats-io/nats-server#4320");
      const nc = await connect({ servers: old.url });
      const streams = await (await jetstreamManager(nc)).streams.names().next();
      await nc.close();
      expect(streams).toEqual([]);
    });

    it("a rolling upgrade under a running `serve`: the server replaced by the suite's on the same port and store; it logs the new version and stays ready", async () => {
      const dir = mkdtempSync(join(tmpdir(), "toolgate-version-"));
      const store = mkdtempSync(join(tmpdir(), "toolgate-upgrade-"));
      let before: NatsServerProcess | undefined = await startNatsServer({ binary: DEBIAN_SERVER, storeDir: store });
      let after: NatsServerProcess | undefined;
      try {
        const gw = await serve({ NATS_URL: before.url, TOOLGATE_DATA_DIR: dir });
        await before.stop({ removeStore: false });
        after = await startNatsServer({ port: before.port, storeDir: store });
        before = undefined;
        const version = versionOf(natsServerBinary());
        await until(
          "the gateway reconnected to the new server",
          () => (gw.logs.some((l) => l.includes('"reconnected to NATS"') && l.includes(`"nats_server":"${version}"`)) ? true : undefined),
          30_000,
        );
        await until("the gateway ready again", async () => ((await fetch(`${gw.url}/readyz`)).status === 200 ? true : undefined), 30_000);
        gw.child.kill("SIGTERM");
        expect(await gw.exited).toBe(0);
      } finally {
        await before?.stop();
        await after?.stop();
        rmSync(dir, { recursive: true, force: true });
        rmSync(store, { recursive: true, force: true });
      }
    });

    it("`serve` with TOOLGATE_STREAM_REPLICAS=3 exits 1 naming the version; with one replica it serves and warns", async () => {
      const dir = mkdtempSync(join(tmpdir(), "toolgate-version-"));
      try {
        const refused = await runCli(["serve"], { NATS_URL: old.url, TOOLGATE_STREAM_REPLICAS: "3", TOOLGATE_DATA_DIR: dir, TOOLGATE_HTTP_PORT: "0" });
        expect(refused.code).toBe(1);
        expect(refused.stderr).toMatch(/toolgate serve: nats-server 2\.9\.10 .*cannot keep replicated storage/);
        const gw = await serve({ NATS_URL: old.url, TOOLGATE_DATA_DIR: dir });
        gw.child.kill("SIGTERM");
        await gw.exited;
        expect(gw.logs.some((l) => l.includes("end-of-life line"))).toBe(true);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });

  it("`serve` without NATS_URL starts the chosen nats-server and logs its version, warning only on an old line", async () => {
    const dir = mkdtempSync(join(tmpdir(), "toolgate-version-"));
    try {
      const gw = await serve({ TOOLGATE_DATA_DIR: dir });
      gw.child.kill("SIGTERM");
      await gw.exited;
      const connected = gw.logs.map((l) => JSON.parse(l) as { msg: string; nats_server?: string }).find((l) => l.msg === "connected to NATS");
      const version = versionOf(natsServerBinary());
      expect(connected?.nats_server).toBe(version);
      expect(gw.logs.some((l) => l.includes("end-of-life line"))).toBe(compareVersions(version, OLDEST_MAINTAINED_LINE) < 0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
