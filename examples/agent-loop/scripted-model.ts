/**
 * A deterministic stand-in for a chat model (no network): it answers OpenAI-style chat messages from
 * a fixed script, so the agent loop around it can be run and tested exactly.
 */
import type { OpenAITool } from "../../src/client/index.js";

export interface ToolCallMessage {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

export type Message =
  | { role: "system" | "user"; content: string }
  | { role: "assistant"; content: string | null; tool_calls?: ToolCallMessage[] }
  | { role: "tool"; tool_call_id: string; content: string };

/** How the loop hands a background task's result to the model: a message of its own, after the calls made meanwhile. */
export const TASK_RESULT_PREFIX = "[background task result] ";

export interface ModelReply {
  message: Extract<Message, { role: "assistant" }>;
  /** What a provider bills for the request: its input tokens. */
  usage: { input_tokens: number };
}

/**
 * Turn 1 creates a task, turn 2 reads the task list, turn 3 answers from what the tool results said.
 * Offered `reports__generate` (an async tool), turn 3 asks for a report instead and, once the report's
 * result arrived as a message of its own, answers from it. It only calls tools it was offered, as a
 * real model would.
 */
export function scriptedModel(messages: readonly Message[], tools: readonly OpenAITool[]): ModelReply {
  const offered = new Set(tools.map((t) => t.function.name));
  const turn = messages.filter((m) => m.role === "assistant").length;
  const usage = { input_tokens: Math.max(1, Math.ceil(Buffer.byteLength(JSON.stringify({ messages, tools })) / 4)) };
  const call = (name: string, args: unknown): ModelReply => {
    if (!offered.has(name)) throw new Error(`the script needs the tool '${name}', which the agent version does not offer`);
    return {
      message: {
        role: "assistant",
        content: null,
        tool_calls: [{ id: `call_${turn + 1}`, type: "function", function: { name, arguments: JSON.stringify(args) } }],
      },
      usage,
    };
  };
  if (turn === 0) return call("tasks__create", { title: "write the report" });
  if (turn === 1) return call("tasks__read", {});
  if (offered.has("reports__generate")) {
    const report = messages.find((m): m is Extract<Message, { role: "system" | "user" }> => m.role === "user" && m.content.startsWith(TASK_RESULT_PREFIX));
    if (turn === 2) return call("reports__generate", { topic: "my open tasks" });
    if (!report) return { message: { role: "assistant", content: "Your report is being generated; I will tell you when it is ready." }, usage };
    return { message: { role: "assistant", content: `The report is ready: ${report.content.slice(TASK_RESULT_PREFIX.length)}` }, usage };
  }
  const lastResult = [...messages].reverse().find((m) => m.role === "tool");
  return { message: { role: "assistant", content: `Done. The task list now reads: ${lastResult?.content ?? "(nothing)"}` }, usage };
}
