import { describe, expect, it } from "vitest";
import { compileJsonSchema, schemaDetails } from "../../src/validation/json-schema.js";

describe("compileJsonSchema", () => {
  it("gives a schema object the validator it compiled before, and one that validates as the schema says", () => {
    const schema = { type: "object", properties: { limit: { type: "integer" } }, required: ["limit"] };
    const first = compileJsonSchema(schema, ["arguments"]);
    const again = compileJsonSchema(schema, ["arguments"]);
    expect(again.validate).toBe(first.validate);
    expect(schemaDetails(again.validate!, { limit: 3 }, ["arguments"])).toEqual([]);
    expect(schemaDetails(again.validate!, {}, ["arguments"])).toEqual([expect.objectContaining({ path: "arguments.limit", code: "required" })]);
  });

  it("reports an invalid schema each time it is asked, at the place it is asked about", () => {
    const schema = { type: "no-such-type" };
    const asTool = compileJsonSchema(schema, ["tools", 0, "input_schema"]);
    const asArguments = compileJsonSchema(schema, ["arguments"]);
    expect(asTool.validate).toBeUndefined();
    expect(asArguments.validate).toBeUndefined();
    expect(asTool.details.map((d) => d.path)).toEqual(["tools[0].input_schema.type"]);
    expect(asArguments.details.map((d) => d.path)).toEqual(["arguments.type"]);
  });
});
