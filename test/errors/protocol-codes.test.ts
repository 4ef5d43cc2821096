import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { GATEWAY_OUTCOME_CODES, REFUSAL_CODES, RUNNER_CODES, renderProtocolCodeTables } from "../../src/errors/protocol-codes.js";
import { RefusalCode } from "../../src/wire/messages.js";

const root = new URL("../../", import.meta.url);
const SRC = new URL("src/", root).pathname;

function sources(dir: string): { file: string; text: string }[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory()
      ? sources(join(dir, e.name))
      : e.name.endsWith(".ts")
        ? [{ file: join(dir, e.name).slice(SRC.length), text: readFileSync(join(dir, e.name), "utf8") }]
        : [],
  );
}

/**
 * The modules that speak the executor protocol: the ToolRunner and the MCP executor built on it, the
 * gateway's execution core (not its HTTP routes, whose codes are HTTP_ERRORS') and the admission check.
 */
const protocolSources = () =>
  [...sources(join(SRC, "runner")), ...sources(join(SRC, "mcp-executor")), ...sources(join(SRC, "execution")), ...sources(join(SRC, "executors"))].filter(
    (s) => !s.file.startsWith("execution/http/") && s.file !== "executors/executor-store.ts", // the registry's validation details are HTTP's
  );

const CODE = String.raw`"([a-z]+(?:_[a-z]+)*)"`;
/** Every way a code literal is written or compared at an emitting site. */
const EMITTING = [
  new RegExp(String.raw`\bcode: ${CODE}`, "g"),
  new RegExp(String.raw`\b(?:refused|rejected|refuse|describeError|BusinessFailure|SubmissionRefused)\(\s*${CODE}`, "g"),
  new RegExp(String.raw`\bcode\s*[!=]==\s*${CODE}`, "g"),
  new RegExp(String.raw`\bSubmissionRefused\([^;]*?\? ${CODE} : ${CODE}`, "g"), // a code chosen by a condition
  new RegExp(String.raw`\bREFUSAL_BY_STATE\[[^\]]*\] \?\? ${CODE}`, "g"), // the claim refusal of any other state
];

function emittedCodes(): Map<string, string[]> {
  const found = new Map<string, string[]>();
  for (const { file, text } of protocolSources()) {
    const literals = EMITTING.flatMap((re) => [...text.matchAll(re)].flatMap((m) => m.slice(1).filter(Boolean)));
    // The claim refusal a settled assignment's state stands for.
    const byState = /REFUSAL_BY_STATE[^=]*=\s*\{([^}]*)\}/.exec(text)?.[1] ?? "";
    literals.push(...[...byState.matchAll(new RegExp(`:\\s*${CODE}`, "g"))].map((m) => m[1]!));
    for (const code of literals) found.set(code, [...(found.get(code) ?? []), file]);
  }
  return found;
}

const declared = new Set([...Object.keys(REFUSAL_CODES), ...Object.keys(RUNNER_CODES), ...Object.keys(GATEWAY_OUTCOME_CODES)]);

describe("the protocol code catalogue", () => {
  it("declares every code literal the runner, the MCP executor and the execution core emit or compare", () => {
    const emitted = emittedCodes();
    const undeclared = [...emitted].filter(([code]) => !declared.has(code)).map(([code, files]) => `${code} (${[...new Set(files)].join(", ")})`);
    expect(undeclared).toEqual([]);
  });

  it("declares no code nothing emits", () => {
    const emitted = emittedCodes();
    // A gateway refusal may also be emitted through a typed Set or a state map the scan reads above; it must still be written somewhere.
    expect([...declared].filter((code) => !emitted.has(code))).toEqual([]);
  });

  it("the wire's RefusalCode enum is exactly the declared gateway answers", () => {
    expect(RefusalCode.options).toEqual(Object.keys(REFUSAL_CODES));
    expect(RefusalCode.safeParse("no_such_code").success).toBe(false);
  });

  it("docs/protocol.md carries exactly the catalogue's tables", () => {
    const doc = readFileSync(new URL("docs/protocol.md", root), "utf8");
    const [start, end] = ["<!-- protocol-codes:start -->", "<!-- protocol-codes:end -->"];
    expect(doc.includes(start) && doc.includes(end), "docs/protocol.md has the protocol-codes markers").toBe(true);
    const tables = doc.slice(doc.indexOf(start) + start.length, doc.indexOf(end)).trim();
    expect(tables, "render it with renderProtocolCodeTables() from src/errors/protocol-codes.ts").toBe(renderProtocolCodeTables());
  });
});
