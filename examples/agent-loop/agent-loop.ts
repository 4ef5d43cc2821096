/**
 * A complete agent loop against a running toolgate, with a scripted stand-in for the model
 * (`scripted-model.ts`). See docs/agent-loop.md.
 *
 *   TOOLGATE_URL=http://127.0.0.1:8080 TOOLGATE_KEY=$(cat .toolgate/admin.key) TOOLGATE_SESSION=<session id> \
 *     node --import tsx examples/agent-loop/agent-loop.ts
 *
 * It prints one JSON line per step. AGENT_MAX_TURNS (default 8) bounds the model calls; a loop that
 * runs out of turns, or is interrupted (Ctrl-C), cancels its run. In a product, import from
 * "toolgate/client" instead of the source path.
 */
import { ToolgateClient, type TaskResult } from "../../src/client/index.js";
import { scriptedModel, TASK_RESULT_PREFIX, type Message } from "./scripted-model.js";

const client = new ToolgateClient({ baseUrl: process.env.TOOLGATE_URL ?? "http://127.0.0.1:8080", apiKey: required("TOOLGATE_KEY") });
const sessionId = required("TOOLGATE_SESSION");
const maxTurns = Number(process.env.AGENT_MAX_TURNS ?? 8);
const say = (step: string, facts: Record<string, unknown> = {}) => console.log(JSON.stringify({ step, ...facts }));

// 1. The tools the session's agent version pins, in the shape the model API takes.
const session = await client.getSession(sessionId);
const tools = await client.agentTools(session.agent_version);
say("tools", { offered: tools.openai().map((t) => t.function.name) });

// 2. A run for this conversation; Ctrl-C cancels it (pending calls withdrawn, running work abandoned).
const run = await client.createRun(sessionId);
say("run", { run_id: run.run_id });
const interrupted = new AbortController();
process.once("SIGINT", () => interrupted.abort(new Error("interrupted")));
const messages: Message[] = [
  { role: "system", content: "You manage the user's tasks with the tools you are given." },
  { role: "user", content: "Add a task to write the report, then show me my tasks." },
];
/** Tool results at the head of the conversation the loop has replaced by a marker. */
let compactedToolCalls = 0;
/** Background tasks the model started (async tools) whose outcome it has not seen yet, and the task results handed to it. */
let pendingTasks = 0;
let seenTaskResults = 0;

try {
  for (let turn = 1; ; turn++) {
    if (turn > maxTurns) {
      await client.cancelRun(run.run_id);
      say("cancelled", { reason: `no answer within ${maxTurns} model calls` });
      break;
    }
    // 7. Background task results that arrived meanwhile go in before the model is called again.
    if (pendingTasks > 0) deliver((await client.history(run.run_id)).task_results.slice(seenTaskResults));
    // 3. Honour must_compact before calling the model: drop the oldest tool results from the prompt.
    if ((await client.contextWindow(run.run_id)).must_compact) compactedToolCalls = compact(messages);

    const reply = scriptedModel(messages, tools.openai());
    messages.push(reply.message);
    // 4. Report what the provider billed, and the prompt's bytes besides the tool results.
    const window = await client.reportUsage(run.run_id, {
      input_tokens: reply.usage.input_tokens,
      prompt_text_bytes: promptTextBytes(messages),
      compacted_tool_calls: compactedToolCalls,
    });
    say("model", { turn, tool_calls: reply.message.tool_calls?.length ?? 0, estimated_tokens: window.estimated_tokens, must_compact: window.must_compact });

    if (!reply.message.tool_calls?.length) {
      if (pendingTasks > 0) {
        // The model is waiting for a background task: learn of its result from the run's event stream.
        say("waiting", { tasks: pendingTasks });
        deliver(await client.taskResults(run.run_id, seenTaskResults, { signal: interrupted.signal, timeoutMs: 120_000 }));
        continue;
      }
      await client.completeRun(run.run_id);
      say("answer", { content: reply.message.content });
      break;
    }
    // 5. Each tool call through toolgate: idempotent by the model's call id, the answer is the stored projection.
    for (const requested of reply.message.tool_calls) {
      const call = await client.callTool(
        run.run_id,
        { tool_name: tools.toolName(requested.function.name), arguments: JSON.parse(requested.function.arguments), tool_call_id: requested.id },
        { signal: interrupted.signal },
      );
      const answer = await call.result({ signal: interrupted.signal, timeoutMs: 60_000 });
      // A call that submitted a background task is answered by its submission (task_ref, status): the run goes on.
      const content = JSON.stringify(
        answer.state === "completed" || answer.state === "submitted" ? answer.context_preview : { state: answer.state, outcome: answer.outcome },
      );
      if (answer.state === "submitted") pendingTasks++;
      messages.push({ role: "tool", tool_call_id: requested.id, content });
      say("tool", { name: answer.tool_name, state: answer.state, bytes: Buffer.byteLength(content) });
    }
  }
} catch (err) {
  if (!interrupted.signal.aborted) throw err;
  await client.cancelRun(run.run_id);
  say("cancelled", { reason: "interrupted" });
}

/**
 * Hands background task results to the model, each as a message of its own: the tool message of the
 * call that submitted it already holds the submission, and what the model saw must not change.
 */
function deliver(results: readonly TaskResult[]): void {
  for (const r of results) {
    const outcome = r.state === "completed" ? r.context_preview?.result : r.outcome;
    messages.push({
      role: "user",
      content: TASK_RESULT_PREFIX + JSON.stringify({ tool: r.tool_name, tool_call_id: r.tool_call_id, task_ref: r.task_ref, state: r.state, result: outcome }),
    });
    seenTaskResults++;
    // reconciliation_required may still be settled by the product: another result would follow.
    if (r.state !== "reconciliation_required") pendingTasks--;
    say("task_result", { name: r.tool_name, state: r.state });
  }
}

/** Replaces every tool result but the last by a marker; answers how many are compacted now. */
function compact(conversation: Message[]): number {
  const results = conversation.filter((m) => m.role === "tool");
  for (const m of results.slice(0, -1)) m.content = "[compacted]";
  const count = Math.max(0, results.length - 1);
  say("compacted", { tool_results: count });
  return count;
}

/** UTF-8 bytes of everything in the prompt except the tool results (toolgate counts those itself). */
function promptTextBytes(conversation: readonly Message[]): number {
  return Math.max(1, Buffer.byteLength(JSON.stringify(conversation.filter((m) => m.role !== "tool"))) + Buffer.byteLength(JSON.stringify(tools.openai())));
}

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: see the header of examples/agent-loop/agent-loop.ts`);
  return value;
}
