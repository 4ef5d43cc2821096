import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { GatewayEnvSchema, gatewayConfigFromEnv } from "../../src/gateway/config.js";

/**
 * deploy/compose.yaml is readable YAML, and there is no YAML parser among the dependencies (nor a
 * Docker engine to run `docker compose config`): it is checked by targeted assertions on its text,
 * against the NATS config, the Dockerfile and the gateway's environment schema.
 */
const compose = readFileSync("deploy/compose.yaml", "utf8");
const natsConf = readFileSync("deploy/nats/nats.conf", "utf8");
const dockerfile = readFileSync("Dockerfile", "utf8");

/** The lines of a top-level key (`x-nats: &nats`) or a service (`  gateway:`), up to the next sibling. */
function block(header: string): string {
  const lines = compose.split("\n");
  const start = lines.findIndex((l) => l === header || l.startsWith(header + " "));
  expect(start, `compose.yaml has ${header.trim()}`).toBeGreaterThanOrEqual(0);
  const indent = header.length - header.trimStart().length;
  const end = lines.findIndex((l, i) => i > start && l.trim() !== "" && !l.startsWith("#") && l.length - l.trimStart().length <= indent);
  return lines.slice(start, end === -1 ? undefined : end).join("\n");
}

/** `KEY: value` pairs of an environment mapping block (values unquoted). */
function envPairs(text: string): Record<string, string> {
  return Object.fromEntries([...text.matchAll(/^ {2,6}([A-Z][A-Z0-9_]+): (.+)$/gm)].map((m) => [m[1]!, m[2]!.replace(/^"(.*)"$/, "$1")]));
}

const natsServices = ["nats-1", "nats-2", "nats-3"];
const clientPort = /^listen: 0\.0\.0\.0:(\d+)$/m.exec(natsConf)![1];
const clusterPort = /^ {2}listen: 0\.0\.0\.0:(\d+)$/m.exec(natsConf)![1];
const monitorPort = /^http: 0\.0\.0\.0:(\d+)$/m.exec(natsConf)![1];
const gatewayEnv = { ...envPairs(block("x-gateway-env: &gateway-env")), ...envPairs(block("  gateway:")) };

describe("deploy/compose.yaml", () => {
  it("runs a 3-node NATS 2.15 cluster: routes to every node, one JetStream volume each, health on the monitoring port", () => {
    const nats = block("x-nats: &nats");
    expect(nats).toContain("image: nats:2.15-alpine");
    expect(nats).toContain('"-c", "/etc/nats/nats.conf"');
    const routes = /"--routes", "([^"]+)"/.exec(nats)![1]!.split(",");
    expect(routes).toEqual(natsServices.map((s) => `nats-route://${s}:${clusterPort}`));
    expect(nats).toContain(`http://127.0.0.1:${monitorPort}/healthz?js-enabled-only=true`);
    expect(natsConf).toMatch(/^server_name: \$HOSTNAME$/m);
    expect(natsConf).toMatch(/^ {2}store_dir: \/data\/jetstream$/m);
    for (const name of natsServices) {
      const svc = block(`  ${name}:`);
      expect(svc).toContain("<<: *nats");
      expect(svc).toContain(`hostname: ${name}`);
      expect(svc).toContain(`volumes: ["./nats:/etc/nats:ro", "${name}-data:/data"]`);
      expect(block("volumes:")).toContain(`  ${name}-data:`);
    }
  });

  it("gives every NATS client its nkey seed as a compose secret file, and keeps secrets out of the file", () => {
    const secrets = Object.fromEntries([...block("secrets:").matchAll(/^ {2}([\w-]+):\n {4}file: (\S+)$/gm)].map((m) => [m[1]!, m[2]!]));
    expect(Object.keys(secrets).sort()).toEqual(["executor-nkey", "gateway-nkey"]);
    for (const [service, secret] of [
      ["streams", "gateway-nkey"],
      ["gateway", "gateway-nkey"],
      ["executor", "executor-nkey"],
    ]) {
      expect(block(`  ${service}:`), service).toContain(`secrets: [${secret}]`);
      const env = service === "executor" ? envPairs(block("  executor:")) : gatewayEnv;
      expect(env.NATS_NKEY_SEED_FILE, service).toBe(`/run/secrets/${secret}`);
    }
    // Every secret-bearing value in the file is a `${VAR:?message}` reference, never a literal.
    for (const [, key, value] of compose.matchAll(/^\s+([A-Z_]*(?:PASSWORD|IDENTITIES|SEED|KEY|TOKEN)[A-Z_]*): (.+)$/gm))
      if (!key!.endsWith("_FILE")) expect(value, key).toMatch(/^\$\{[A-Z_]+:\?[^}]+\}$/);
  });

  it("runs two gateway replicas on R3 streams with a configuration the gateway accepts", () => {
    const gateway = block("  gateway:");
    expect(gateway).toMatch(/deploy:\n\s+replicas: 2\n/);
    expect(gateway).toContain('command: ["serve"]');
    expect(gatewayEnv.TOOLGATE_STREAM_REPLICAS).toBe("3");
    expect(block("  streams:")).toContain('command: ["streams", "apply", "--replicas", "3"]');
    expect(gatewayEnv.NATS_URL!.split(",")).toEqual(natsServices.map((s) => `nats://${s}:${clientPort}`));
    for (const name of Object.keys(gatewayEnv)) expect(Object.keys(GatewayEnvSchema.shape), name).toContain(name);
    const literal = Object.fromEntries(Object.entries(gatewayEnv).map(([k, v]) => [k, v.startsWith("${") ? "placeholder-0123456789" : v]));
    const config = gatewayConfigFromEnv({ ...literal, NATS_NKEY_SEED_FILE: undefined, TOOLGATE_IDENTITIES: "[]" }); // the seed file exists only in a deployment
    // The orchestrator's grace period must outlast the gateway's own shutdown deadline.
    const grace = Number(/stop_grace_period: (\d+)s/.exec(gateway)![1]) * 1000;
    expect(grace).toBeGreaterThan(config.TOOLGATE_SHUTDOWN_TIMEOUT_MS);
    expect(gateway).toContain(`ports: ["127.0.0.1:8081-8082:${/TOOLGATE_HTTP_PORT=(\d+)/.exec(dockerfile)![1]}"]`);
  });

  it("runs one example executor from the Dockerfile's example-executor target, on a persistent store", () => {
    const executor = block("  executor:");
    const env = envPairs(executor);
    expect(gatewayEnv.NATS_URL!.split(",")).toContain(env.NATS_URL);
    expect(executor).toMatch(/^ {4}volumes: \["executor-data:\/var\/lib\/toolgate"\]$/m);
    for (const [, target] of compose.matchAll(/target: ([\w-]+)/g)) expect(dockerfile).toMatch(new RegExp(`^FROM \\S+ AS ${target}$`, "m"));
    expect(executor).not.toMatch(/^ {4}deploy:/m); // one replica: the example's store is a single SQLite file
  });
});
