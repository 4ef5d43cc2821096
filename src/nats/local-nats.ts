import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import type { Logger } from "../log/logger.js";
import { executorJetStreamMappings } from "../security/jsapi-bridge.js";
import { startNatsServer, type NatsServerProcess } from "./nats-server-process.js";

/**
 * The local NATS of `toolgate serve` without NATS_URL: an embedded nats-server on a stable port
 * (not 4222, which a machine's own NATS usually holds), and its URL in `<data dir>/nats.url` so
 * that `toolgate status`, the other CLI commands and a local executor find it without being told.
 */
export const DEFAULT_DATA_DIR = "./.toolgate";
export const DEFAULT_EMBEDDED_NATS_PORT = 14222;
const URL_FILE = "nats.url";

/** `<data dir>/nats.url`; the data dir is TOOLGATE_DATA_DIR, `./.toolgate` by default. */
export function localNatsUrlFile(dataDir: string | undefined = process.env.TOOLGATE_DATA_DIR): string {
  return join(dataDir || DEFAULT_DATA_DIR, URL_FILE);
}

/** The URL a local `toolgate serve` wrote, or undefined when none runs from this data dir. */
export function readLocalNatsUrl(dataDir?: string): string | undefined {
  try {
    return readFileSync(localNatsUrlFile(dataDir), "utf8").trim() || undefined;
  } catch {
    return undefined;
  }
}

/**
 * Where a local process finds NATS: NATS_URL, else the URL a local `toolgate serve` wrote (its
 * embedded nats-server). Throws, saying what to do, when there is neither.
 */
export function localNatsUrl(env: Record<string, string | undefined> = process.env): string {
  if (env.NATS_URL) return env.NATS_URL;
  const written = readLocalNatsUrl(env.TOOLGATE_DATA_DIR);
  if (written) return written;
  throw new Error(
    `no NATS server: set NATS_URL, or start 'npx toolgate serve' from this directory first (it writes ${localNatsUrlFile(env.TOOLGATE_DATA_DIR)})`,
  );
}

/** A running embedded nats-server whose URL file is removed again on stop. */
export interface EmbeddedNats {
  readonly server: NatsServerProcess;
  readonly urlFile: string;
  stop(): Promise<void>;
}

/**
 * Starts the embedded nats-server with its store in `<data dir>/nats` on `port` (0: a free one); when
 * that port is taken, on a free one instead (logged). Writes its URL to `<data dir>/nats.url`.
 */
export async function startEmbeddedNats(dataDir: string, port: number, logger: Logger): Promise<EmbeddedNats> {
  const storeDir = resolve(join(dataDir, "nats"));
  // The executors' pulls are mapped to JetStream by the server itself, as a secured deployment's account layout does.
  const config = executorJetStreamMappings();
  let server: NatsServerProcess;
  try {
    server = await startNatsServer({ storeDir, port, config, ownProcessGroup: true });
  } catch (err) {
    if (port === 0 || !/address already in use/.test((err as Error).message)) throw err;
    logger.warn(
      { port },
      "the embedded nats-server's port is taken: using a free one instead (see nats.url); set TOOLGATE_EMBEDDED_NATS_PORT to choose another",
    );
    server = await startNatsServer({ storeDir, port: 0, config, ownProcessGroup: true });
  }
  const urlFile = localNatsUrlFile(dataDir);
  mkdirSync(dataDir, { recursive: true });
  writeFileSync(urlFile, server.url + "\n");
  logger.info(
    { url: server.url, urlFile, storeDir, pid: server.child.pid },
    "NATS_URL not set: started an embedded nats-server (local use; set NATS_URL for a real deployment)",
  );
  return {
    server,
    urlFile,
    async stop() {
      // Only our own URL: a second local gateway may have written its own since.
      if (readLocalNatsUrl(dataDir) === server.url) rmSync(urlFile, { force: true });
      await server.stop({ removeStore: false });
    },
  };
}
