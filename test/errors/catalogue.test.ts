import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { HTTP_ERRORS, renderErrorTable, type HttpErrorCode } from "../../src/errors/catalogue.js";

const root = new URL("../../", import.meta.url);
const SRC = new URL("src/", root).pathname;

function sources(dir = SRC): { file: string; text: string }[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory()
      ? sources(join(dir, e.name))
      : e.name.endsWith(".ts")
        ? [{ file: join(dir, e.name).slice(SRC.length), text: readFileSync(join(dir, e.name), "utf8") }]
        : [],
  );
}

/** Every code raised with a literal anywhere in src/ (the compiler already rejects a code the catalogue lacks). */
function raisedCodes(): Set<string> {
  const patterns = [
    /new (?:ToolgateError|ApiError)\(\s*"(\w+)"/g,
    /ToolgateError\.validation\(()/g, // validation_failed
    /\bfound\([^;]*?,\s*"(\w+)",/g, // the configuration routes' "or not found" helper
  ];
  const codes = sources().flatMap(({ text }) => patterns.flatMap((re) => [...text.matchAll(re)].map((m) => m[1] || "validation_failed")));
  return new Set(codes);
}

const outsideHttp = () => sources().filter((s) => !s.file.startsWith("http/"));
/** Neither the HTTP layer nor the catalogue's own module (whose `callerFault` reads the status class). */
const domain = () => outsideHttp().filter((s) => !s.file.startsWith("errors/"));

describe("the error catalogue", () => {
  it("declares no code nothing raises", () => {
    const codes = raisedCodes();
    expect((Object.keys(HTTP_ERRORS) as HttpErrorCode[]).filter((code) => !codes.has(code))).toEqual([]);
  });

  it("docs/http-api.md carries exactly the catalogue's table", () => {
    const doc = readFileSync(new URL("docs/http-api.md", root), "utf8");
    const [start, end] = ["<!-- error-codes:start -->", "<!-- error-codes:end -->"];
    const table = doc.slice(doc.indexOf(start) + start.length, doc.indexOf(end)).trim();
    expect(doc.includes(start) && doc.includes(end), "docs/http-api.md has the error-codes markers").toBe(true);
    expect(table, "render it with renderErrorTable() from src/errors/catalogue.ts").toBe(renderErrorTable());
  });
});

// That no module outside src/http/ imports the HTTP error class is eslint's rule (eslint.config.js).
describe("the boundary between domain errors and HTTP", () => {
  it("only src/http/ turns a code into a status: nothing else reads the catalogue's statuses", () => {
    const readers = domain().filter(({ text }) => /HTTP_ERRORS\s*\[[^\]]*\]\s*\.\s*status/.test(text));
    expect(readers.map((s) => s.file)).toEqual([]);
  });

  it("code that catches ToolgateError branches on its code, never on an HTTP status number", () => {
    const branching = domain()
      .filter(({ text }) => /\bToolgateError\b/.test(text))
      .filter(({ text }) => /\.status\s*(?:[<>]=?|[!=]==?)\s*\d{3}\b/.test(text));
    expect(branching.map((s) => s.file)).toEqual([]);
  });
});
