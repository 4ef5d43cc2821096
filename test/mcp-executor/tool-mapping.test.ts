import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import { describe, expect, it } from "vitest";
import { kindFromAnnotations, mapTools, ToolMappingError } from "../../src/mcp-executor/tool-mapping.js";

const tool = (name: string, annotations?: Tool["annotations"], extra: Partial<Tool> = {}): Tool => ({
  name,
  inputSchema: { type: "object" },
  ...(annotations ? { annotations } : {}),
  ...extra,
});

describe("MCP tool mapping", () => {
  it("reads only what says readOnlyHint: true (and not destructiveHint: true); everything else writes", () => {
    expect(kindFromAnnotations(tool("a", { readOnlyHint: true }))).toBe("read");
    expect(kindFromAnnotations(tool("b", { readOnlyHint: true, destructiveHint: true }))).toBe("write");
    expect(kindFromAnnotations(tool("c", { readOnlyHint: false, idempotentHint: true }))).toBe("write");
    expect(kindFromAnnotations(tool("d", { destructiveHint: false }))).toBe("write");
    expect(kindFromAnnotations(tool("e"))).toBe("write");
  });

  it("flags override the annotations; bindings follow the kind; the prefix names the toolgate tool", () => {
    const { tools } = mapTools([tool("lookup", { readOnlyHint: true }), tool("store"), tool("peek")], {
      binding: "mem",
      read: ["peek"],
      write: ["lookup"],
      prefix: "memory",
    });
    expect(tools.map((t) => [t.name, t.mcpName, t.kind, t.kindFrom, t.bindingId])).toEqual([
      ["memory.lookup", "lookup", "write", "flag", "mem"],
      ["memory.store", "store", "write", "default", "mem"],
      ["memory.peek", "peek", "read", "flag", "mem-read"],
    ]);
  });

  it("leaves out task-only tools and refuses flags naming unknown tools, a tool given both kinds, and names toolgate cannot use", () => {
    expect(mapTools([tool("a"), tool("t", undefined, { execution: { taskSupport: "required" } })], { binding: "b" }).skipped).toEqual(["t"]);
    expect(() => mapTools([tool("a")], { binding: "b", read: ["nope"] })).toThrow(ToolMappingError);
    expect(() => mapTools([tool("a")], { binding: "b", read: ["a"], write: ["a"] })).toThrow(/both/);
    expect(() => mapTools([tool("has space")], { binding: "b" })).toThrow(/cannot be a toolgate tool name/);
  });
});
