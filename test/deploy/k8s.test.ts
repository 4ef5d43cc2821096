import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { GatewayEnvSchema, gatewayConfigFromEnv } from "../../src/gateway/config.js";

/** The manifests are JSON documents (valid YAML): parsed as they are, then checked against each other and the code. */
const DIR = "deploy/k8s";
type Obj = { apiVersion: string; kind: string; metadata: { name: string; labels: Record<string, string> }; spec: any };
const manifests: Array<Obj & { file: string }> = readdirSync(DIR)
  .filter((f) => f.endsWith(".yaml"))
  .map((file) => ({ file, ...(JSON.parse(readFileSync(join(DIR, file), "utf8")) as Obj) }));
const find = (kind: string, name: string) => {
  const m = manifests.find((o) => o.kind === kind && o.metadata.name === name);
  expect(m, `${kind}/${name}`).toBeDefined();
  return m!;
};
const readme = readFileSync(join(DIR, "README.md"), "utf8");
const natsConf = readFileSync("deploy/nats/nats.conf", "utf8");
const dockerfile = readFileSync("Dockerfile", "utf8");
const imageUid = Number(/^USER (\d+):\d+$/m.exec(dockerfile)![1]);
const imageEnv = (name: string) => new RegExp(`${name}=(\\S+)`).exec(dockerfile)![1]!;

type Container = {
  name: string;
  env: Array<{ name: string; value?: string; valueFrom?: any }>;
  ports?: Array<{ name: string; containerPort: number }>;
  [k: string]: any;
};
const podSpec = (o: Obj) => o.spec.template.spec as { containers: Container[]; volumes?: any[]; securityContext: any; terminationGracePeriodSeconds: number };
const env = (c: Container) => Object.fromEntries(c.env.filter((e) => e.value !== undefined).map((e) => [e.name, e.value!]));
const secretRefs = (c: Container) =>
  c.env.filter((e) => e.valueFrom?.secretKeyRef).map((e) => [e.name, e.valueFrom.secretKeyRef.name, e.valueFrom.secretKeyRef.key] as const);
const bytes = (size: string) => Number(/^(\d+)/.exec(size)![1]) * { GB: 1e9, Gi: 2 ** 30, MB: 1e6, Mi: 2 ** 20 }[/(GB|Gi|MB|Mi)$/.exec(size)![1]!]!;

const nats = find("StatefulSet", "toolgate-nats");
const natsService = find("Service", "toolgate-nats");
const gateway = find("Deployment", "toolgate-gateway");
const executor = find("Deployment", "toolgate-example-executor");
const gatewayContainer = podSpec(gateway).containers[0]!;
const natsPorts = { client: /^listen: 0\.0\.0\.0:(\d+)$/m, cluster: /^ {2}listen: 0\.0\.0\.0:(\d+)$/m, monitor: /^http: 0\.0\.0\.0:(\d+)$/m };

/** The pod mounts only its own seed from the nkeys Secret, group-readable, where NATS_NKEY_SEED_FILE points. */
function expectSeedMounted(workload: Obj, c: Container, key: string): void {
  const volume = podSpec(workload).volumes!.find((v) => v.name === "nkey");
  expect(volume).toEqual({ name: "nkey", secret: { secretName: "toolgate-nats-nkeys", items: [{ key, path: key }], defaultMode: 0o440 } });
  const mount = c.volumeMounts.find((m: { name: string }) => m.name === "nkey");
  expect(mount.readOnly).toBe(true);
  expect(env(c).NATS_NKEY_SEED_FILE).toBe(`${mount.mountPath}/${key}`);
}

describe("deploy/k8s manifests", () => {
  it("are one labelled object per file, never a Secret, and every selector matches its pods", () => {
    expect(manifests.length).toBeGreaterThanOrEqual(9);
    for (const m of manifests) {
      expect(m.apiVersion, m.file).toBeTruthy();
      expect(m.metadata.labels["app.kubernetes.io/part-of"], m.file).toBe("toolgate");
      expect(m.kind, m.file).not.toBe("Secret");
      const selector = m.spec.selector?.matchLabels ?? (m.kind === "Service" ? m.spec.selector : m.spec.podSelector?.matchLabels);
      if (!selector) continue;
      const pods = manifests.filter((o) => o.spec.template && Object.entries(selector).every(([k, v]) => o.spec.template.metadata.labels[k] === v));
      expect(pods.length, `${m.file} selects some pods`).toBe(1);
      if (m.spec.template) expect(pods[0]).toBe(m);
      for (const port of m.kind === "Service" ? m.spec.ports : [])
        expect(
          podSpec(pods[0]!)
            .containers.flatMap((c) => c.ports ?? [])
            .map((p) => p.name),
          m.file,
        ).toContain(port.targetPort);
    }
  });

  it("run every pod as the image's non-root user, read-only, with requests and limits", () => {
    for (const workload of [nats, gateway, executor]) {
      const spec = podSpec(workload);
      expect(spec.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: imageUid, fsGroup: imageUid, seccompProfile: { type: "RuntimeDefault" } });
      for (const c of spec.containers) {
        expect(c.securityContext, c.name).toEqual({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ["ALL"] } });
        expect(c.resources.requests.cpu && c.resources.requests.memory, c.name).toBeTruthy();
        expect(c.resources.limits.memory, c.name).toBeTruthy();
      }
    }
  });

  it("runs NATS as a 3-node StatefulSet routed by the headless Service's pod names, JetStream on a big enough volume", () => {
    expect(nats.spec.replicas).toBe(3);
    expect(nats.spec.serviceName).toBe(natsService.metadata.name);
    expect(natsService.spec).toMatchObject({ clusterIP: "None", publishNotReadyAddresses: true });
    const c = podSpec(nats).containers[0]!;
    expect(c.image).toBe("nats:2.15-alpine");
    const ports = Object.fromEntries(c.ports!.map((p) => [p.name, p.containerPort]));
    for (const [name, re] of Object.entries(natsPorts)) expect(ports[name], name).toBe(Number(re.exec(natsConf)![1]));
    const routes = c.args[c.args.indexOf("--routes") + 1].split(",");
    expect(routes).toEqual([0, 1, 2].map((i) => `nats-route://${nats.metadata.name}-${i}.${natsService.metadata.name}:${ports.cluster}`));
    expect(c.args.slice(0, 2)).toEqual(["-c", "/etc/nats/nats.conf"]);
    expect(c.volumeMounts).toContainEqual({ name: "config", mountPath: "/etc/nats", readOnly: true });
    expect(podSpec(nats).volumes).toContainEqual({ name: "config", configMap: { name: "toolgate-nats-config" } });
    // nats.conf includes auth.conf: the ConfigMap carries both, the second generated by toolgate nats-config.
    expect(natsConf).toMatch(/^include auth\.conf$/m);
    expect(readme).toContain("create configmap toolgate-nats-config --from-file=deploy/nats/nats.conf --from-file=auth.conf");
    expect(readme).toContain('toolgate nats-config --gateway-nkey "$GATEWAY_NKEY" --executors executors.json --out auth.conf');
    // server_name is $HOSTNAME (nats.conf): the pod name, set explicitly.
    expect(c.env).toContainEqual({ name: "HOSTNAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } });
    expect(secretRefs(c)).toEqual([]);
    const store = /^ {2}store_dir: (\S+)$/m.exec(natsConf)![1]!;
    const mount = c.volumeMounts.find((v: { name: string }) => v.name === "data").mountPath as string;
    expect(store.startsWith(mount + "/")).toBe(true);
    const claim = nats.spec.volumeClaimTemplates[0].spec.resources.requests.storage as string;
    expect(bytes(claim)).toBeGreaterThan(bytes(/max_file_store: (\S+)/.exec(natsConf)![1]!));
    expect(c.livenessProbe.httpGet).toEqual({ path: "/healthz?js-enabled-only=true", port: "monitor" });
    // Lame duck (nats.conf) fits in the preStop and the grace period.
    const ldm = Number(/lame_duck_duration: (\d+)s/.exec(natsConf)![1]) + Number(/lame_duck_grace_period: (\d+)s/.exec(natsConf)![1]);
    expect(c.lifecycle.preStop.exec.command.join(" ")).toContain(`nats-server --signal ldm=1 && sleep ${ldm}`);
    expect(podSpec(nats).terminationGracePeriodSeconds).toBeGreaterThan(ldm);
    expect(find("PodDisruptionBudget", "toolgate-nats").spec.maxUnavailable).toBe(1);
  });

  it("runs two gateway replicas on R3 streams, ready on /readyz, live on /healthz, with a configuration the gateway accepts", () => {
    expect(gateway.spec.replicas).toBe(2);
    expect(gatewayContainer.args).toEqual(["serve"]);
    const vars = env(gatewayContainer);
    for (const name of gatewayContainer.env.map((e) => e.name)) expect(Object.keys(GatewayEnvSchema.shape), name).toContain(name);
    const config = gatewayConfigFromEnv({ ...vars, NATS_NKEY_SEED_FILE: undefined, TOOLGATE_HTTP_PORT: imageEnv("TOOLGATE_HTTP_PORT") }); // the seed exists only in the pod
    expect(config.TOOLGATE_STREAM_REPLICAS).toBe(nats.spec.replicas);
    expect(vars.NATS_URL!.split(",")).toEqual(
      [0, 1, 2].map((i) => `nats://${nats.metadata.name}-${i}.${natsService.metadata.name}:${Number(natsPorts.client.exec(natsConf)![1])}`),
    );
    expectSeedMounted(gateway, gatewayContainer, "gateway.nk");

    const ports = Object.fromEntries(gatewayContainer.ports!.map((p) => [p.name, p.containerPort]));
    expect(ports.http).toBe(config.TOOLGATE_HTTP_PORT);
    expect(ports.metrics).toBe(config.TOOLGATE_METRICS_PORT);
    expect(gateway.spec.template.metadata.annotations).toEqual({
      "prometheus.io/scrape": "true",
      "prometheus.io/port": String(config.TOOLGATE_METRICS_PORT),
      "prometheus.io/path": "/metrics",
    });
    expect(gatewayContainer.readinessProbe.httpGet).toEqual({ path: "/readyz", port: "http" });
    expect(gatewayContainer.livenessProbe.httpGet).toEqual({ path: "/healthz", port: "http" });

    // The identities file is the mounted Secret; the data dir and /tmp are writable volumes on a read-only root.
    const mounts = Object.fromEntries(gatewayContainer.volumeMounts.map((m: { name: string; mountPath: string }) => [m.name, m.mountPath]));
    expect(config.TOOLGATE_IDENTITIES_FILE!.startsWith(mounts.identities + "/")).toBe(true);
    expect(podSpec(gateway).volumes).toContainEqual({ name: "identities", secret: { secretName: "toolgate-identities" } });
    expect(readme).toContain(`create secret generic toolgate-identities --from-file=${config.TOOLGATE_IDENTITIES_FILE!.split("/").at(-1)}=`);
    expect(mounts.data).toBe(imageEnv("TOOLGATE_DATA_DIR"));
    expect(mounts.tmp).toBe("/tmp");

    // SIGTERM comes after the preStop sleep; the shutdown deadline must end before the grace period does.
    const preStop = Number(gatewayContainer.lifecycle.preStop.exec.command[1]);
    expect(preStop * 1000 + config.TOOLGATE_SHUTDOWN_TIMEOUT_MS).toBeLessThan(podSpec(gateway).terminationGracePeriodSeconds * 1000);
    expect(gateway.spec.strategy.rollingUpdate.maxUnavailable).toBe(0);
    const pdb = find("PodDisruptionBudget", "toolgate-gateway");
    expect(pdb.spec.minAvailable).toBeGreaterThan(0);
    expect(pdb.spec.minAvailable).toBeLessThan(gateway.spec.replicas);
  });

  it("runs the example executor once, as its scope's NATS user, with its store on a persistent volume", () => {
    const c = podSpec(executor).containers[0]!;
    expect(executor.spec).toMatchObject({ replicas: 1, strategy: { type: "Recreate" } });
    expect(c.image).toMatch(/^toolgate-example-executor:/);
    expect(env(c).NATS_URL).toBe(`nats://${natsService.metadata.name}:${Number(natsPorts.client.exec(natsConf)![1])}`);
    expectSeedMounted(executor, c, "executor.nk");
    const store = podSpec(executor).volumes!.find((v) => v.name === "store");
    find("PersistentVolumeClaim", store.persistentVolumeClaim.claimName);
    const runnerStore = /RUNNER_STORE=(\S+)/.exec(dockerfile)![1]!;
    expect(runnerStore.startsWith(c.volumeMounts.find((m: { name: string }) => m.name === "store").mountPath + "/")).toBe(true);
  });

  it("names every Secret it mounts in the README's creation commands", () => {
    const mounted = manifests.flatMap((m) => (m.spec.template ? (podSpec(m).volumes ?? []).filter((v) => v.secret) : []));
    expect(mounted.length).toBeGreaterThan(0);
    for (const v of mounted) {
      expect(readme).toContain(`create secret generic ${v.secret.secretName} `);
      for (const item of v.secret.items ?? []) expect(readme).toContain(`--from-file=${item.key}=`);
    }
  });
});
