import type { ToolDefinition } from "../config/schemas.js";

/** A tool as the OpenAI Chat Completions API takes it in `tools`. */
export interface OpenAITool {
  type: "function";
  function: { name: string; description: string; parameters: Record<string, unknown> };
}

/** A tool as the Anthropic Messages API takes it in `tools`. */
export interface AnthropicTool {
  name: string;
  description: string;
  input_schema: Record<string, unknown>;
}

/** What both model APIs allow in a tool name; toolgate's dotted names are mapped onto it. */
const MODEL_TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/**
 * The tools of a toolset version as a model sees them, and the way back: model APIs allow no dots in a
 * tool name, so `tasks.read` is offered as `tasks__read`, and `toolName()` turns the model's choice back
 * into the toolgate name `callTool` needs.
 */
export class ModelTools {
  readonly #byModelName = new Map<string, ToolDefinition>();

  constructor(tools: readonly ToolDefinition[]) {
    for (const tool of tools) {
      const name = tool.name.replaceAll(".", "__");
      if (!MODEL_TOOL_NAME.test(name))
        throw new Error(`tool '${tool.name}' becomes '${name}' for the model, longer than the 64 characters model APIs allow: shorten its name`);
      const other = this.#byModelName.get(name);
      if (other) throw new Error(`tools '${other.name}' and '${tool.name}' both become '${name}' for the model: rename one`);
      this.#byModelName.set(name, tool);
    }
  }

  /** For `tools` of an OpenAI chat completion request. */
  openai(): OpenAITool[] {
    return [...this.#byModelName].map(([name, tool]) => ({
      type: "function",
      function: { name, description: tool.description, parameters: tool.input_schema },
    }));
  }

  /** For `tools` of an Anthropic messages request. */
  anthropic(): AnthropicTool[] {
    return [...this.#byModelName].map(([name, tool]) => ({ name, description: tool.description, input_schema: tool.input_schema }));
  }

  /** The toolgate tool name of a name the model called; throws for a name that was not offered. */
  toolName(modelName: string): string {
    const tool = this.#byModelName.get(modelName);
    if (!tool) throw new Error(`the model called '${modelName}', which is not one of the offered tools (${[...this.#byModelName.keys()].join(", ")})`);
    return tool.name;
  }
}
