import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const entry = new URL("../../src/cli/run.ts", import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), "toolgate-measure-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function measure(args: string[], stdin?: string) {
  const run = spawnSync(process.execPath, ["--import", "tsx", entry, "measure", ...args], { input: stdin, encoding: "utf8" });
  return { code: run.status, stdout: run.stdout, stderr: run.stderr };
}

describe("toolgate measure", () => {
  it("prints the context_preview of stdin as one canonical JSON line", () => {
    const { code, stdout, stderr } = measure([], '{"tasks": [], "next_cursor": "page-2"}');
    expect(stderr).toBe("");
    expect(code).toBe(0);
    expect(stdout).toBe(
      '{"max_result_context_bytes":16384,"original_bytes":35,"projection_version":2,"result":{"next_cursor":"page-2","tasks":[]},"retained_bytes":35,"truncated":false}\n',
    );
  });

  it("reads a file, applies --budget and --kind", () => {
    const file = join(dir, "big.json");
    writeFileSync(file, JSON.stringify({ status: "ok", rows: "中".repeat(3000) }));
    const cut = JSON.parse(measure(["--budget", "1024", file]).stdout);
    expect(cut).toMatchObject({ max_result_context_bytes: 1024, original_bytes: 9025, truncated: true, result: { preserved_fields: { status: "ok" } } });
    expect(cut.retained_bytes).toBeLessThanOrEqual(1024);
    const exempt = JSON.parse(measure(["--budget=1024", "--kind", "submission", file]).stdout);
    expect(exempt).toMatchObject({ original_bytes: 9025, retained_bytes: 9025, truncated: false });
  });

  it.each([
    ["bad JSON", [], "{not json", /stdin is not valid JSON/],
    ["NaN", [], '{"x": NaN}', /not valid JSON \(RFC 8259: no NaN, Infinity/],
    ["a number beyond double range", [], '{"x": 1e400}', /1e400 is beyond the range of a float \(JSON has no Infinity\)/],
    ["an integer Python cannot write", [], `[${"9".repeat(4301)}]`, /an integer of 4301 digits exceeds 4300 digits/],
    ["a budget below the range", ["--budget", "1023"], "{}", /--budget "1023": max_result_context_bytes must be an integer from 1024 to 32768/],
    ["a budget above the range", ["--budget", "40000"], "{}", /integer from 1024 to 32768/],
    ["a budget that is no integer", ["--budget", "2k"], "{}", /integer from 1024 to 32768/],
    ["an unknown kind", ["--kind", "opaque"], "{}", /expected one of completed, submission, reconciliation_required/],
    ["a missing file", [join(dir, "absent.json")], undefined, /cannot read/],
  ])("exits 2 on %s with a clear message on stderr", (_, args, stdin, message) => {
    const { code, stdout, stderr } = measure(args as string[], stdin as string | undefined);
    expect(code).toBe(2);
    expect(stdout).toBe("");
    expect(stderr).toMatch(message as RegExp);
  });
});
