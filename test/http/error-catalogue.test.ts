import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { HTTP_ERRORS, renderErrorTable, type HttpErrorCode } from "../../src/http/error-catalogue.js";

const root = new URL("../../", import.meta.url);
const SRC = new URL("src/", root).pathname;

function sources(dir = SRC): { file: string; text: string }[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith(".ts") ? [{ file: join(dir, e.name).slice(SRC.length), text: readFileSync(join(dir, e.name), "utf8") }] : [],
  );
}

/** Every place that raises an HTTP error with a literal code, and the status it raises it with. */
function raised(): { file: string; code: string; status: number }[] {
  const patterns: [RegExp, (m: RegExpMatchArray) => number][] = [
    [/new ApiError\(\s*(\d{3}),\s*"(\w+)"/g, (m) => Number(m[1])],
    [/ApiError\.notFound\(\s*"(\w+)"/g, () => 404],
    [/ApiError\.conflict\(\s*"(\w+)"/g, () => 409],
    [/\bfound\([^;]*?,\s*"(\w+)",/g, () => 404], // the configuration routes' "or 404" helper
  ];
  return sources()
    .filter((s) => s.file !== "http/error-catalogue.ts")
    .flatMap(({ file, text }) => patterns.flatMap(([re, status]) => [...text.matchAll(re)].map((m) => ({ file, code: m[m.length - 1]!, status: status(m) }))));
}

describe("the HTTP error catalogue", () => {
  it("every code raised is declared with the status it is raised with", () => {
    const wrong = raised().filter((r) => HTTP_ERRORS[r.code as HttpErrorCode]?.status !== r.status);
    expect(wrong).toEqual([]);
  });

  it("declares no code nothing raises", () => {
    const codes = new Set(raised().map((r) => r.code));
    expect((Object.keys(HTTP_ERRORS) as HttpErrorCode[]).filter((code) => !codes.has(code))).toEqual([]);
  });

  it("docs/http-api.md carries exactly the catalogue's table", () => {
    const doc = readFileSync(new URL("docs/http-api.md", root), "utf8");
    const [start, end] = ["<!-- error-codes:start -->", "<!-- error-codes:end -->"];
    const table = doc.slice(doc.indexOf(start) + start.length, doc.indexOf(end)).trim();
    expect(doc.includes(start) && doc.includes(end), "docs/http-api.md has the error-codes markers").toBe(true);
    expect(table, "render it with renderErrorTable() from src/http/error-catalogue.ts").toBe(renderErrorTable());
  });
});
