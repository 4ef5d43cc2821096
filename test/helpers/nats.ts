import { existsSync } from "node:fs";
import { jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { startNatsServer, type NatsServerOptions, type NatsServerProcess } from "../../src/nats/nats-server-process.js";
import { STREAMS } from "../../src/streams/names.js";
import { subjects } from "../../src/wire/subjects.js";
import { until } from "./until.js";

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
 * entry expiring (presence TTL) does not. A gateway renews the candidates' anchor (a write) within
 * `ANCHOR_RENEWAL_MS` of offering candidates: this waits until the anchor is that stream's last message.
 */
export async function streamWatermarks(nc: NatsConnection, except: readonly string[] = []): Promise<Record<string, number>> {
  const jsm = await jetstreamManager(nc);
  await until("the candidates' anchor renewed after the last candidate offered", async () => {
    const info = await jsm.streams.info(STREAMS.candidates).catch(() => null);
    if (!info || info.state.messages === 0) return true;
    const anchor = await jsm.streams.getMessage(STREAMS.candidates, { last_by_subj: subjects.candidateAnchor });
    return anchor?.seq === info.state.last_seq ? true : undefined;
  });
  const out: Record<string, number> = {};
  for await (const info of jsm.streams.list()) if (!except.includes(info.config.name)) out[info.config.name] = info.state.last_seq;
  return out;
}

/** How many messages `stream` holds on the subjects `filter` matches (a stream's `messages` counts them all). */
export async function storedOn(jsm: JetStreamManager, stream: string, filter: string): Promise<number> {
  const info = await jsm.streams.info(stream, { subjects_filter: filter });
  return Object.values(info.state.subjects ?? {}).reduce((sum, n) => sum + n, 0);
}
