import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect } from "@nats-io/transport-node";
import { gatewayConfigFromEnv, GatewayConfigError } from "../../src/gateway/config.js";
import { natsClientOptions } from "../../src/nats/client-options.js";
import { startNatsServer, type NatsServerProcess } from "../../src/nats/nats-server-process.js";
import { startExecutionGateway } from "../helpers/execution-gateway.js";

/** A CA, a server certificate for 127.0.0.1 and a client certificate, made with openssl for this run only. */
function makePki(dir: string): void {
  const ssl = (...args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: "ignore" });
  ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=toolgate test CA", "-keyout", "ca-key.pem", "-out", "ca.pem");
  writeFileSync(join(dir, "san.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n");
  for (const name of ["server", "client"]) {
    ssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", `/CN=${name}`, "-keyout", `${name}-key.pem`, "-out", `${name}.csr`);
    ssl(
      "x509",
      "-req",
      "-in",
      `${name}.csr`,
      "-CA",
      "ca.pem",
      "-CAkey",
      "ca-key.pem",
      "-CAcreateserial",
      "-days",
      "1",
      "-extfile",
      "san.ext",
      "-out",
      `${name}.pem`,
    );
  }
}

describe("TLS to NATS (self-signed CA, client certificates verified)", () => {
  const dir = mkdtempSync(join(tmpdir(), "toolgate-tls-"));
  const f = (name: string) => join(dir, name);
  let server: NatsServerProcess;

  beforeAll(async () => {
    makePki(dir);
    writeFileSync(f("tls.conf"), `tls { cert_file: "${f("server.pem")}", key_file: "${f("server-key.pem")}", ca_file: "${f("ca.pem")}", verify: true }\n`);
    server = await startNatsServer({ args: ["-c", f("tls.conf")] });
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const env = { NATS_TLS_CA: f("ca.pem"), NATS_TLS_CERT: f("client.pem"), NATS_TLS_KEY: f("client-key.pem") };

  it("runs the gateway over TLS with NATS_TLS_CA/CERT/KEY", async () => {
    const gw = await startExecutionGateway(server.url, {}, env);
    try {
      expect((await gw.http("GET", "/readyz")).status).toBe(200);
    } finally {
      await gw.close();
    }
  });

  it("is refused by the server without a client certificate, and without the CA the server is not trusted", async () => {
    await expect(connect({ servers: server.url, reconnect: false, ...natsClientOptions({ NATS_TLS_CA: env.NATS_TLS_CA }) })).rejects.toThrow();
    await expect(connect({ servers: server.url, reconnect: false, tls: { certFile: env.NATS_TLS_CERT, keyFile: env.NATS_TLS_KEY } })).rejects.toThrow();
  });

  it("validates the settings at start", () => {
    const base = { NATS_URL: server.url, TOOLGATE_IDENTITIES: "[]" };
    expect(() => gatewayConfigFromEnv({ ...base, NATS_TLS_CA: f("missing.pem") })).toThrow(GatewayConfigError);
    expect(() => gatewayConfigFromEnv({ ...base, NATS_TLS_CERT: env.NATS_TLS_CERT })).toThrow(/together/);
    expect(() => gatewayConfigFromEnv({ ...base, NATS_NKEY_SEED: "not-a-seed" })).toThrow(/NATS_NKEY_SEED does not hold/);
    expect(() => gatewayConfigFromEnv({ ...base, NATS_NKEY_SEED: "not-a-seed" })).not.toThrow(/not-a-seed/);
  });
});
