import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

/** Every tracked text file but this one (it has to name what it looks for). */
const files = execFileSync("git", ["ls-files", "--", "*.md", "*.ts", "*.js", "*.json", "*.yaml", "Dockerfile"], { encoding: "utf8" })
  .split("\n")
  .filter((f) => f && f !== "test/docs/self-contained.test.ts" && f !== "package-lock.json");

const protocol = readFileSync("docs/protocol.md", "utf8");
const protocolSections = new Set([...protocol.matchAll(/^## (\d)\. /gm)].map((m) => m[1]));
/** GitHub's anchor of each heading: lower case, punctuation dropped, spaces to hyphens. */
const protocolAnchors = new Set(
  [...protocol.matchAll(/^#+ (.+)$/gm)].map((m) =>
    m[1]!
      .toLowerCase()
      .replace(/[^\p{L}\p{N} _-]/gu, "")
      .replace(/ /g, "-"),
  ),
);

describe("the repository stands on its own", () => {
  it("sends no reader outside it: no PROTOCOL.md, no ../shared/", () => {
    const outside = files.filter((f) => /PROTOCOL\.md|\.\.\/shared\/|shared\/spec/.test(readFileSync(f, "utf8")));
    expect(outside).toEqual([]);
  });

  it("docs/protocol.md states the protocol in sections 1 to 6, and every section cited exists", () => {
    expect([...protocolSections]).toEqual(["1", "2", "3", "4", "5", "6"]);
    for (const f of files) {
      const text = readFileSync(f, "utf8");
      for (const m of text.matchAll(/protocol\.md\]?(?:\([^)]*\))? sections? (\d)(?: (?:and|to) (\d))?/g)) {
        for (const n of [m[1], m[2]].filter(Boolean)) expect(protocolSections.has(n!), `${f}: ${m[0]}`).toBe(true);
      }
      for (const m of text.matchAll(/protocol\.md#([\w-]+)/g)) expect(protocolAnchors.has(m[1]!), `${f}: #${m[1]}`).toBe(true);
    }
  });
});
