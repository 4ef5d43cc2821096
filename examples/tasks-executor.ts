/**
 * A worked ToolRunner example: a product's executor serving a read tool (`tasks.read`) and a write
 * tool (`tasks.create`) against a local toolgate. See examples/README.md for the commands.
 *
 *   node --import tsx examples/tasks-executor.ts
 *
 * NATS: NATS_URL, else the embedded nats-server of a local `npx toolgate serve` started from the
 * same directory (its URL is in .toolgate/nats.url).
 *
 * Behind NATS authorization also NATS_NKEY_SEED_FILE (docs/security.md); in a container: the
 * Dockerfile's `example-executor` target (deploy/compose.yaml and deploy/k8s/ run it).
 *
 * In a product, import from "toolgate/runner" instead of the source path.
 */
import { BusinessFailure, localNatsUrl, ToolRunner } from "../src/runner/index.js";

/** The product's own system: an in-memory task list standing in for its database. */
const tasks = new Map<string, { id: string; title: string; owner: string }>();

const runner = new ToolRunner({
  natsUrl: localNatsUrl(),
  executorId: process.env.EXECUTOR_ID ?? "tasks-executor-1",
  scope: "tasks-product",
  store: process.env.RUNNER_STORE ?? "./tasks-executor.db",
  // Every call: the product's own permission check on the end user, the agent and the arguments.
  authorize: ({ subject, tool_name }) => (subject.startsWith("user-") ? true : { allowed: false, reason: `${subject} may not use ${tool_name}` }),
});

runner.tool<{ cursor?: string }>("tasks.read", {
  kind: "read",
  bindingId: "tasks-read",
  async handler({ arguments: args, grant }) {
    const mine = [...tasks.values()].filter((t) => t.owner === grant.subject);
    const start = Number(args.cursor ?? 0);
    const page = mine.slice(start, start + 20);
    // Cursor and ids first and compact, so they survive the result budget (check with the dry-run).
    return { next_cursor: start + 20 < mine.length ? String(start + 20) : null, tasks: page.map((t) => ({ id: t.id, title: t.title })) };
  },
});

runner.tool<{ title: string }>("tasks.create", {
  kind: "write",
  bindingId: "tasks-write",
  async handler({ arguments: args, grant, progress, signal }) {
    if (!args.title.trim()) throw new BusinessFailure("empty_title", "a task needs a title");
    await progress({ step: "validated" });
    signal.throwIfAborted();
    // The operation key is the idempotency key in the product's own system.
    const id = `task-${grant.operation_key.replace(/[^A-Za-z0-9_-]/g, "-")}`;
    tasks.set(id, { id, title: args.title, owner: grant.subject });
    return { task_id: id, title: args.title };
  },
});

process.on("SIGTERM", () => void runner.close({ deadlineMs: 10_000 }).then(() => process.exit(0)));
process.on("SIGINT", () => void runner.close({ deadlineMs: 10_000 }).then(() => process.exit(0)));
await runner.start();
console.log("tasks executor online (scope tasks-product); Ctrl-C to stop");
