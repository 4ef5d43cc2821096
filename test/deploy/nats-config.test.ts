import { spawnSync } from "node:child_process";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { natsServerBinary } from "../../src/nats/nats-server-process.js";
import { runCli } from "../helpers/serve.js";

/**
 * deploy/nats/nats.conf (the cluster config of compose and Kubernetes) with the auth.conf that
 * `toolgate nats-config` generates, following the steps in compose.yaml's header. What the generated
 * permissions allow and refuse is tested by the security suites against a running server.
 */
describe("deploy/nats: cluster config with the generated authorization", () => {
  let dir: string;
  const compose = readFileSync("deploy/compose.yaml", "utf8");

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "toolgate-deploy-nats-"));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("is valid for nats-server once auth.conf is generated as compose.yaml's header says", async () => {
    const key = async (name: string) => {
      const res = await runCli(["nkey", "--seed-out", join(dir, `${name}.nk`)]);
      expect(res.code, res.stderr).toBe(0);
      return res.stdout.trim();
    };
    const [gatewayKey, executorKey] = [await key("gateway"), await key("executor")];
    // The registration line of compose.yaml's header, with this run's key.
    const printf = /printf '(\[.*\])\\n' "\$EXECUTOR_NKEY" > nats\/executors\.json/.exec(compose)![1]!;
    writeFileSync(join(dir, "executors.json"), printf.replace("%s", executorKey));
    const generated = await runCli(["nats-config", "--gateway-nkey", gatewayKey, "--executors", join(dir, "executors.json"), "--out", join(dir, "auth.conf")]);
    expect(generated.code, generated.stderr).toBe(0);
    copyFileSync("deploy/nats/nats.conf", join(dir, "nats.conf"));

    const check = spawnSync(natsServerBinary(), ["-c", join(dir, "nats.conf"), "-t"], {
      env: { PATH: process.env.PATH ?? "", HOSTNAME: "nats-1" },
      encoding: "utf8",
    });
    expect(check.status, check.stderr + check.stdout).toBe(0);
    const auth = readFileSync(join(dir, "auth.conf"), "utf8");
    expect(auth).toContain(gatewayKey);
    expect(auth).toContain("# executor tasks-worker-1, scope tasks-product");
  });

  it("registers the executor the deployments run: same id and scope as compose, Kubernetes and the example", () => {
    const [registration] = JSON.parse(/printf '(\[.*\])\\n'/.exec(compose)![1]!.replace("%s", "U")) as Array<{ executor_id: string; scope: string }>;
    expect(compose).toContain(`EXECUTOR_ID: ${registration!.executor_id}`);
    const k8s = JSON.parse(readFileSync("deploy/k8s/executor-deployment.yaml", "utf8")) as {
      spec: { template: { spec: { containers: Array<{ env: Array<{ name: string; value?: string }> }> } } };
    };
    expect(k8s.spec.template.spec.containers[0]!.env).toContainEqual({ name: "EXECUTOR_ID", value: registration!.executor_id });
    const example = readFileSync("examples/tasks-executor.ts", "utf8");
    expect(example).toContain(`const SCOPE = "${registration!.scope}"`);
    // The bindings it is registered for are the example's tools' bindings.
    for (const binding of (registration as { bindings?: string[] }).bindings ?? []) expect(example).toContain(`"${binding}"`);
    expect((registration as { bindings?: string[] }).bindings).toHaveLength(2);
  });

  it("keeps generated files and seeds out of the repository", () => {
    const ignored = readFileSync(".gitignore", "utf8").split("\n");
    for (const path of ["deploy/nats/auth.conf", "deploy/nats/executors.json", "deploy/secrets/", "deploy/.env"]) expect(ignored).toContain(path);
    for (const [, file] of compose.matchAll(/file: (\S+)/g)) expect(file).toMatch(/^\.\/secrets\//);
  });
});
