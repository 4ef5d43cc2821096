import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  ASSIGNMENT_EVENTS,
  ASSIGNMENT_STATES,
  ASSIGNMENT_TRANSITIONS,
  isTerminalAssignmentState,
  nextAssignmentState,
  renderAssignmentTable,
} from "../../../src/execution/model/assignment-states.js";
import { nextRunState, renderRunTable } from "../../../src/execution/model/run-states.js";

const doc = readFileSync(new URL("../../../docs/protocol.md", import.meta.url), "utf8");
const section = (name: string) =>
  doc.slice(doc.indexOf(`<!-- ${name}:start -->`) + `<!-- ${name}:start -->`.length, doc.indexOf(`<!-- ${name}:end -->`)).trim();

describe("state tables", () => {
  it("docs/protocol.md carries exactly the tables of the code", () => {
    expect(section("assignment-table")).toBe(renderAssignmentTable());
    expect(section("run-table")).toBe(renderRunTable());
  });

  it("has no edge out of a terminal state, at most one per state and event, and reaches every state", () => {
    const seen = new Set<string>();
    for (const t of ASSIGNMENT_TRANSITIONS) {
      expect(isTerminalAssignmentState(t.from), `${t.from} is terminal`).toBe(false);
      expect(seen.has(`${t.from}:${t.event}`)).toBe(false);
      seen.add(`${t.from}:${t.event}`);
    }
    const reached = new Set(["pending", ...ASSIGNMENT_TRANSITIONS.map((t) => t.to)]);
    expect([...reached].sort()).toEqual([...ASSIGNMENT_STATES].sort());
    for (const state of ASSIGNMENT_STATES.filter(isTerminalAssignmentState))
      for (const event of ASSIGNMENT_EVENTS) expect(nextAssignmentState(state, event)).toBeUndefined();
  });

  it("ends a run once", () => {
    expect(nextRunState("active", "cancel")).toBe("cancelled");
    expect(nextRunState("cancelled", "complete")).toBeUndefined();
    expect(nextRunState("completed", "cancel")).toBeUndefined();
  });
});
