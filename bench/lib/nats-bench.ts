import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

/** The NATS CLI: `TOOLGATE_NATS_CLI`, else the one `npm run tools` installed, else `nats` on PATH. */
export function natsCli(): string {
  const installed = fileURLToPath(new URL("../../.tools/natscli/nats", import.meta.url));
  return process.env.TOOLGATE_NATS_CLI || (existsSync(installed) ? installed : "nats");
}

export interface NatsBenchResult {
  msgsPerSec: number;
  p50Us: number;
  p99Us: number;
}

/**
 * `nats bench js pub <sync|async>`: the NATS CLI's own benchmark of persisted JetStream publishes, on a
 * stream of its own (file storage, one replica) on the server at `url`. `batch` is its number of
 * asynchronous publishes in flight.
 */
export async function natsBenchPublish(
  url: string,
  options: { mode: "sync" | "async"; messages: number; messageBytes: number; batch?: number; stream: string },
): Promise<NatsBenchResult> {
  const dir = mkdtempSync(join(tmpdir(), "toolgate-natsbench-"));
  const csv = join(dir, "bench.csv");
  const args = ["bench", "js", "pub", options.mode, "bench.pub", "--server", url, "--create", "--purge", "--storage", "file", "--replicas", "1"];
  args.push("--stream", options.stream, "--msgs", String(options.messages), "--size", `${options.messageBytes}B`, "--no-progress", "--csv", csv);
  if (options.batch !== undefined) args.push("--batch", String(options.batch));
  try {
    await promisify(execFile)(natsCli(), args, { timeout: 300_000 });
    // One header line, then one line per client: …,MsgsPerSec,…,P50LatencyMicroSecs,P90…,P99LatencyMicroSecs,…
    const [header, row] = readFileSync(csv, "utf8").trim().split("\n");
    const columns = header!.replace(/^#/, "").split(",");
    const values = row!.split(",");
    const column = (name: string) => Number(values[columns.indexOf(name)]);
    return { msgsPerSec: column("MsgsPerSec"), p50Us: column("P50LatencyMicroSecs"), p99Us: column("P99LatencyMicroSecs") };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT")
      throw new Error(`the NATS CLI '${natsCli()}' was not found: run \`npm run tools\` (installs .tools/natscli/nats) or set TOOLGATE_NATS_CLI`, {
        cause: err,
      });
    throw err;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
