import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { compareVersions } from "./server-version.js";

/** Options for a local `nats-server -js` child process. */
export interface NatsServerOptions {
  /** JetStream store directory; a fresh temporary one when omitted (and removed on stop). */
  storeDir?: string;
  /** Client port; 0 (default) lets the server pick a free one, so suites never collide with :4222. */
  port?: number;
  /** Extra command-line arguments, e.g. `["-c", "auth.conf"]`. */
  args?: string[];
  /** Configuration text, written to `nats-server.conf` in the store dir and passed with `-c` (the command line's flags win over it). */
  config?: string;
  /** Executable; defaults to `natsServerBinary()`. */
  binary?: string;
  /** How long to wait for "Server is ready". */
  startTimeoutMs?: number;
  /**
   * Its own process group: a terminal's Ctrl-C, or a shell's `kill %job`, then reaches only the
   * parent, which stops the server itself once its connection has drained.
   */
  ownProcessGroup?: boolean;
}

/** A running nats-server child process. */
export interface NatsServerProcess {
  readonly url: string;
  readonly port: number;
  readonly storeDir: string;
  /** SIGTERM and wait; `removeStore` deletes a temporary store dir too. */
  stop(opts?: { removeStore?: boolean }): Promise<void>;
  /** SIGKILL, for fault tests. */
  kill(): Promise<void>;
  /** Start again on the same port and store dir (after stop or kill). */
  restart(): Promise<void>;
  /** The server's latest log lines since it was last (re)started (up to ~16 KB), for a failure to show. */
  recentLog(): string;
  readonly child: ChildProcess;
}

/** How much of a running server's log `recentLog` keeps. */
const RECENT_LOG_CHARS = 16_000;

const READY = /Server is ready/;
const LISTEN = /Listening for client connections on [^\s]*:(\d+)/;

/** `.tools/` of a toolgate checkout (from src/nats or dist/nats), where `npm run tools` installs servers. */
const TOOLS_DIR = fileURLToPath(new URL("../../.tools/", import.meta.url));

/**
 * The nats-server to start: `TOOLGATE_NATS_SERVER` (a path), else the newest one `npm run tools`
 * installed in the checkout's .tools/, else `nats-server` on PATH (Debian's package, a container's).
 */
export function natsServerBinary(): string {
  return process.env.TOOLGATE_NATS_SERVER || newestInstalledServer() || "nats-server";
}

function newestInstalledServer(): string | undefined {
  const versions = existsSync(TOOLS_DIR) ? readdirSync(TOOLS_DIR).flatMap((name) => /^nats-(\d+\.\d+\.\d+)$/.exec(name)?.[1] ?? []) : [];
  const newest = versions
    .filter((v) => existsSync(join(TOOLS_DIR, `nats-${v}`, "nats-server")))
    .sort(compareVersions)
    .at(-1);
  return newest && join(TOOLS_DIR, `nats-${newest}`, "nats-server");
}

/**
 * Spawns `nats-server -js` bound to 127.0.0.1 and resolves once it reports ready.
 * A port of 0 is passed as -1 (random) and the chosen port is read from the server's log.
 */
export async function startNatsServer(options: NatsServerOptions = {}): Promise<NatsServerProcess> {
  const ownsStore = options.storeDir === undefined;
  const storeDir = options.storeDir ?? mkdtempSync(join(tmpdir(), "toolgate-nats-"));
  const binary = options.binary ?? natsServerBinary();
  const timeoutMs = options.startTimeoutMs ?? 15_000;
  let port = options.port ?? 0;
  let child!: ChildProcess;
  let recent = "";

  const configArgs: string[] = [];
  if (options.config !== undefined) {
    const file = join(storeDir, "nats-server.conf");
    mkdirSync(storeDir, { recursive: true });
    writeFileSync(file, options.config);
    configArgs.push("-c", file);
  }

  const launch = async (): Promise<void> => {
    const args = ["-a", "127.0.0.1", "-p", String(port === 0 ? -1 : port), "-js", "-sd", storeDir, ...configArgs, ...(options.args ?? [])];
    child = spawn(binary, args, { stdio: ["ignore", "ignore", "pipe"], detached: options.ownProcessGroup ?? false });
    port = await waitForReady(child, binary, timeoutMs);
    recent = "";
    child.stderr?.on("data", (chunk: string) => {
      recent = (recent + chunk).slice(-RECENT_LOG_CHARS);
    });
  };

  const waitExit = (signal: NodeJS.Signals): Promise<void> =>
    new Promise((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once("exit", () => resolve());
      child.kill(signal);
    });

  await launch();
  return {
    get url() {
      return `nats://127.0.0.1:${port}`;
    },
    get port() {
      return port;
    },
    storeDir,
    get child() {
      return child;
    },
    async stop(opts = {}) {
      await waitExit("SIGTERM");
      if (opts.removeStore ?? ownsStore) rmSync(storeDir, { recursive: true, force: true });
    },
    async kill() {
      await waitExit("SIGKILL");
    },
    async restart() {
      await waitExit("SIGTERM");
      await launch();
    },
    recentLog: () => recent,
  };
}

function waitForReady(child: ChildProcess, binary: string, timeoutMs: number): Promise<number> {
  return new Promise((resolve, reject) => {
    let log = "";
    let port = 0;
    const timer = setTimeout(() => fail(new Error(`nats-server did not become ready within ${timeoutMs} ms:\n${log}`)), timeoutMs);
    const fail = (err: Error) => {
      clearTimeout(timer);
      child.kill("SIGKILL");
      reject(err);
    };
    child.once("error", (err: NodeJS.ErrnoException) =>
      fail(
        err.code === "ENOENT"
          ? new Error(
              `'${binary}' not found: run \`npm run tools\` in a toolgate checkout (installs .tools/nats-<version>), install one (Debian: apt-get install --no-install-recommends nats-server) or set TOOLGATE_NATS_SERVER to its path`,
            )
          : err,
      ),
    );
    child.once("exit", (code) => fail(new Error(`nats-server exited with code ${code} before it was ready:\n${log}`)));
    child.stderr?.setEncoding("utf8");
    child.stderr?.on("data", function onData(chunk: string) {
      if (log.length < 64_000) log += chunk;
      const listen = LISTEN.exec(log);
      if (listen) port = Number(listen[1]);
      if (READY.test(log) && port > 0) {
        clearTimeout(timer);
        child.removeAllListeners("exit");
        child.stderr?.off("data", onData);
        resolve(port); // the caller's own listener keeps draining the pipe, so it never blocks the server
      }
    });
  });
}
