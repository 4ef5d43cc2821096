import { z } from "zod";
import { describe, expect, it } from "vitest";
import { ModelTools } from "../../src/client/index.js";
import type { ToolDefinition } from "../../src/config/schemas.js";

// The documented request shapes: OpenAI Chat Completions `tools[]` (a function tool) and Anthropic
// Messages `tools[]` (a client tool); both allow tool names of ^[a-zA-Z0-9_-]{1,64}$.
const ModelName = z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/);
const JsonSchemaObject = z.looseObject({ type: z.literal("object") });
const OpenAIFunctionTool = z.strictObject({
  type: z.literal("function"),
  function: z.strictObject({ name: ModelName, description: z.string(), parameters: JsonSchemaObject }),
});
const AnthropicClientTool = z.strictObject({ name: ModelName, description: z.string(), input_schema: JsonSchemaObject });

const tool = (name: string): ToolDefinition => ({
  name,
  description: `the ${name} tool`,
  binding_id: "b",
  input_schema: { type: "object", properties: { q: { type: "string" } }, required: ["q"] },
  output_schema: { type: "object" },
  max_result_context_bytes: 16_384,
});

describe("ModelTools", () => {
  const tools = new ModelTools([tool("tasks.read"), tool("tasks.create"), tool("search")]);

  it("offers the tools in the shapes the OpenAI and Anthropic APIs document", () => {
    const openai = tools.openai();
    expect(openai.map((t) => OpenAIFunctionTool.parse(t).function.name)).toEqual(["tasks__read", "tasks__create", "search"]);
    expect(openai[0]!.function.parameters).toEqual(tool("tasks.read").input_schema);
    const anthropic = tools.anthropic();
    expect(anthropic.map((t) => AnthropicClientTool.parse(t).name)).toEqual(["tasks__read", "tasks__create", "search"]);
    expect(anthropic[1]!.description).toBe("the tasks.create tool");
  });

  it("maps the model's choice back to the toolgate name, and refuses a name never offered", () => {
    expect(tools.toolName("tasks__read")).toBe("tasks.read");
    expect(tools.toolName("search")).toBe("search");
    expect(() => tools.toolName("tasks.read")).toThrow("not one of the offered tools");
  });

  it("refuses names that collide or grow too long for a model", () => {
    expect(() => new ModelTools([tool("a.b"), tool("a__b")])).toThrow("both become 'a__b'");
    expect(() => new ModelTools([tool(Array.from({ length: 16 }, () => "abc").join("."))])).toThrow("longer than the 64 characters");
  });
});
