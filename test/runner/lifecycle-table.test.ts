import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { nextRunnerState, RUNNER_EVENTS, RUNNER_STATES, RUNNER_TRANSITIONS, renderRunnerLifecycleTable } from "../../src/runner/lifecycle.js";

const doc = readFileSync(new URL("../../docs/runner.md", import.meta.url), "utf8");
const section = (name: string) =>
  doc.slice(doc.indexOf(`<!-- ${name}:start -->`) + `<!-- ${name}:start -->`.length, doc.indexOf(`<!-- ${name}:end -->`)).trim();

describe("the ToolRunner's lifecycle table", () => {
  it("docs/runner.md carries exactly the table of the code", () => {
    expect(section("runner-lifecycle")).toBe(renderRunnerLifecycleTable());
  });

  it("has at most one edge per state and event, reaches every state, and nothing leaves closed", () => {
    const seen = new Set<string>();
    for (const t of RUNNER_TRANSITIONS) {
      expect(seen.has(`${t.from}:${t.event}`)).toBe(false);
      seen.add(`${t.from}:${t.event}`);
    }
    const reached = new Set(["starting", ...RUNNER_TRANSITIONS.map((t) => t.to)]);
    expect([...reached].sort()).toEqual([...RUNNER_STATES].sort());
    for (const event of RUNNER_EVENTS) expect(() => nextRunnerState("closed", event)).toThrow(`'${event}' is not allowed while closed`);
    // Every state but the last may be closed.
    for (const state of RUNNER_STATES.filter((s) => s !== "closing" && s !== "closed")) expect(nextRunnerState(state, "close")).toBe("closing");
  });
});
