/**
 * A worked ToolRunner example: a product's executor serving a read tool (`tasks.read`), a write
 * tool (`tasks.create`) and, for a toolset that lists it, an async one (`reports.generate`: it submits a
 * report job and reports its progress and result later, docs/async-tasks.md) against a local
 * toolgate. See examples/README.md for the commands.
 *
 *   node --import tsx examples/tasks-executor.ts
 *
 * NATS: NATS_URL, else the embedded nats-server of a local `npx toolgate serve` started from the
 * same directory (its URL is in .toolgate/nats.url).
 *
 * Behind NATS authorization also NATS_NKEY_SEED_FILE (docs/security.md); in a container: the
 * Dockerfile's `example-executor` target (deploy/compose.yaml and deploy/k8s/ run it).
 *
 * The gateway grants claims only to registered executors. Locally this one registers itself at start
 * (`POST /v1/executors`, idempotent) with the admin key: TOOLGATE_ADMIN_KEY, else the file
 * TOOLGATE_ADMIN_KEY_FILE (default admin.key in TOOLGATE_DATA_DIR, .toolgate/, made by the gateway's first local start), at
 * TOOLGATE_URL (default http://127.0.0.1:8080). Without a key an operator must have registered it.
 *
 * In a product, import from "toolgate/runner" instead of the source path.
 */
import { existsSync, readFileSync } from "node:fs";
import { nkeys } from "@nats-io/transport-node";
import { BusinessFailure, localNatsUrl, natsClientEnv, runnerLogger, ToolRunner, type ToolContext } from "../src/runner/index.js";

const SCOPE = "tasks-product";
const EXECUTOR_ID = process.env.EXECUTOR_ID ?? "tasks-executor-1";
const BINDINGS = { read: "tasks-read", write: "tasks-write" };

/** The product's own system: an in-memory task list standing in for its database. */
const tasks = new Map<string, { id: string; title: string; owner: string }>();

/**
 * The product's report service: a job runs in the background for a while; the tool call is answered
 * at once with the job's reference, and the job reports through the runner when it gets somewhere.
 */
const REPORT_MS = Number(process.env.REPORT_MS ?? 1_000);
const reportJobs = new Map<string, NodeJS.Timeout>();
function runReportJob(taskRef: string, owner: string): void {
  const step = (ms: number, then: () => Promise<void>) =>
    reportJobs.set(
      taskRef,
      setTimeout(() => void then().catch((err: unknown) => console.error(`report ${taskRef}: ${String(err)}`)), ms),
    );
  step(REPORT_MS / 2, async () => {
    await runner.tasks.progress(taskRef, { pages_done: 1, pages: 2 });
    step(REPORT_MS / 2, async () => {
      reportJobs.delete(taskRef);
      const mine = [...tasks.values()].filter((t) => t.owner === owner);
      await runner.tasks.complete(taskRef, { report: taskRef, open_tasks: mine.length, titles: mine.map((t) => t.title) });
    });
  });
}

await registerItself();
const runner = await ToolRunner.start({
  natsUrl: localNatsUrl(),
  // Behind NATS authorization: NATS_NKEY_SEED_FILE or NATS_CREDS_FILE, TLS from NATS_TLS_*.
  credentials: natsClientEnv(),
  executorId: EXECUTOR_ID,
  scope: SCOPE,
  store: process.env.RUNNER_STORE ?? "./tasks-executor.db",
  logger: runnerLogger(process.env.LOG_LEVEL),
  // Every call: the product's own permission check on the end user, the agent and the arguments.
  authorize: ({ subject, tool_name }) => (subject.startsWith("user-") ? true : { allowed: false, reason: `${subject} may not use ${tool_name}` }),
  tools: {
    "tasks.read": {
      kind: "read",
      bindingId: BINDINGS.read,
      async handler({ arguments: args, grant }: ToolContext<{ cursor?: string }>) {
        const mine = [...tasks.values()].filter((t) => t.owner === grant.subject);
        const start = Number(args.cursor ?? 0);
        const page = mine.slice(start, start + 20);
        // Cursor and ids first and compact, so they survive the result budget (check with the dry-run).
        return { next_cursor: start + 20 < mine.length ? String(start + 20) : null, tasks: page.map((t) => ({ id: t.id, title: t.title })) };
      },
    },
    "tasks.create": {
      kind: "write",
      bindingId: BINDINGS.write,
      async handler({ arguments: args, grant, progress, signal }: ToolContext<{ title: string }>) {
        if (!args.title.trim()) throw new BusinessFailure("empty_title", "a task needs a title");
        await progress({ step: "validated" });
        signal.throwIfAborted();
        // The operation key is the idempotency key in the product's own system.
        const id = `task-${grant.operation_key.replace(/[^A-Za-z0-9_-]/g, "-")}`;
        tasks.set(id, { id, title: args.title, owner: grant.subject });
        return { task_id: id, title: args.title };
      },
    },
    "reports.generate": {
      kind: "write",
      bindingId: BINDINGS.write,
      handler({ arguments: args, grant, submit }: ToolContext<{ topic: string }>) {
        // The job's id is the task reference, derived from the operation key: the same call never starts two jobs.
        const taskRef = `report-${grant.operation_key.replace(/[^A-Za-z0-9_-]/g, "-")}`;
        if (!reportJobs.has(taskRef)) runReportJob(taskRef, grant.subject);
        return submit({ task_ref: taskRef, status: `report on '${args.topic}' queued; it takes about ${Math.ceil(REPORT_MS / 1000)} s` });
      },
      // A business-task cancel (or the run's end): stop the job, and confirm it stopped.
      async cancelTask({ task_ref, reason }) {
        clearTimeout(reportJobs.get(task_ref));
        reportJobs.delete(task_ref);
        await runner.tasks.cancelled(task_ref, reason).catch(() => undefined); // it may have completed first
      },
    },
  },
});
process.on("SIGTERM", () => void runner.close({ deadlineMs: 10_000 }).then(() => process.exit(0)));
process.on("SIGINT", () => void runner.close({ deadlineMs: 10_000 }).then(() => process.exit(0)));
// Jobs submitted before a restart: this stand-in service lost them with the process, so it runs them again.
for (const task of runner.tasks.list()) runReportJob(task.task_ref, task.grant.subject);
console.log(`tasks executor online (scope ${SCOPE}); Ctrl-C to stop`);

/** Registers this executor with its bindings (and its nkey, behind NATS authorization); the same registration again is fine. */
async function registerItself(): Promise<void> {
  const keyFile = process.env.TOOLGATE_ADMIN_KEY_FILE ?? `${process.env.TOOLGATE_DATA_DIR ?? ".toolgate"}/admin.key`;
  const key = process.env.TOOLGATE_ADMIN_KEY ?? (existsSync(keyFile) ? readFileSync(keyFile, "utf8").trim() : undefined);
  if (!key) {
    console.log(`no admin key (TOOLGATE_ADMIN_KEY, ${keyFile}): not registering ${EXECUTOR_ID}; an operator registers it with POST /v1/executors`);
    return;
  }
  const seedFile = process.env.NATS_NKEY_SEED_FILE;
  const nkey = seedFile ? nkeys.fromSeed(new TextEncoder().encode(readFileSync(seedFile, "utf8").trim())).getPublicKey() : undefined;
  const url = `${process.env.TOOLGATE_URL ?? "http://127.0.0.1:8080"}/v1/executors`;
  const res = await fetch(url, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ executor_id: EXECUTOR_ID, scope: SCOPE, bindings: [BINDINGS.read, BINDINGS.write], ...(nkey ? { nkeys: [nkey] } : {}) }),
  });
  if (!res.ok)
    throw new Error(
      `registering executor ${EXECUTOR_ID} at ${url} failed: HTTP ${res.status} ${await res.text()} (are the bindings registered, step 2 of examples/README.md?)`,
    );
}
