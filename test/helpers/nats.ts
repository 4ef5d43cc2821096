import { existsSync } from "node:fs";
import { jetstreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { startNatsServer, type NatsServerOptions, type NatsServerProcess } from "../../src/nats/nats-server-process.js";

/** A NATS JetStream server owned by one test file. */
export interface TestNats {
  readonly url: string;
  /** Stop and remove its store. */
  stop(): Promise<void>;
  /** SIGKILL the server (local process only), for fault tests. */
  kill(): Promise<void>;
  /** Start it again on the same port and store dir. */
  restart(): Promise<void>;
  /** The local process, when not running in a container. */
  readonly process?: NatsServerProcess;
}

/**
 * Starts a fresh JetStream server for one suite: a local `nats-server -js` child on a random port with
 * its own store dir (the binary: `TOOLGATE_NATS_SERVER`, else the newest in .tools/, else PATH);
 * Testcontainers' NATS module only when a Docker engine answers and no binary was chosen.
 */
export async function startTestNats(options: NatsServerOptions = {}): Promise<TestNats> {
  if (await dockerAnswers()) return startContainer();
  const server = await startNatsServer(options);
  return {
    get url() {
      return server.url;
    },
    process: server,
    stop: () => server.stop({ removeStore: options.storeDir === undefined }),
    kill: () => server.kill(),
    restart: () => server.restart(),
  };
}

async function dockerAnswers(): Promise<boolean> {
  if (process.env.TOOLGATE_TEST_DOCKER === "0" || process.env.TOOLGATE_NATS_SERVER) return false;
  if (!process.env.DOCKER_HOST && !existsSync("/var/run/docker.sock")) return false;
  try {
    const { getContainerRuntimeClient } = await import("testcontainers");
    await getContainerRuntimeClient();
    return true;
  } catch {
    return false;
  }
}

async function startContainer(): Promise<TestNats> {
  const { NatsContainer } = await import("@testcontainers/nats");
  const container = await new NatsContainer("nats:2.15").withJetStream().start();
  const url = () => `nats://${container.getHost()}:${container.getMappedPort(4222)}`;
  return {
    get url() {
      return url();
    },
    stop: async () => {
      await container.stop();
    },
    kill: async () => {
      throw new Error("kill needs a local nats-server process: run with TOOLGATE_TEST_DOCKER=0");
    },
    restart: () => container.restart(),
  };
}

/**
 * `last_seq` of every stream but `except`: any write to a stream or a KV bucket moves it, while an
 * entry expiring (presence TTL) does not.
 */
export async function streamWatermarks(nc: NatsConnection, except: readonly string[] = []): Promise<Record<string, number>> {
  const jsm = await jetstreamManager(nc);
  const out: Record<string, number> = {};
  for await (const info of jsm.streams.list()) if (!except.includes(info.config.name)) out[info.config.name] = info.state.last_seq;
  return out;
}
