import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

const pkg = JSON.parse(readFileSync("package.json", "utf8")) as { license: string; allowScripts: Record<string, boolean> };
const lock = JSON.parse(readFileSync("package-lock.json", "utf8")) as { packages: Record<string, { hasInstallScript?: boolean }> };

describe("package metadata", () => {
  it("LICENSE holds the license package.json names", () => {
    expect(pkg.license).toBe("Apache-2.0");
    const text = readFileSync("LICENSE", "utf8");
    expect(text).toMatch(/^\s+Apache License\n\s+Version 2\.0, January 2004\n/);
    expect(text).toContain("END OF TERMS AND CONDITIONS");
  });

  it("every locked package with an install script is declared in allowScripts (run or not), and nothing else is", () => {
    const withScripts = Object.entries(lock.packages)
      .filter(([path, entry]) => path !== "" && entry.hasInstallScript)
      .map(([path]) => path.slice(path.lastIndexOf("node_modules/") + "node_modules/".length));
    expect([...new Set(withScripts)].sort()).toEqual(Object.keys(pkg.allowScripts).sort());
  });

  it("docs/operations.md gives the reason for each", () => {
    const doc = readFileSync("docs/operations.md", "utf8");
    for (const name of Object.keys(pkg.allowScripts)) expect(doc).toMatch(new RegExp(`^\\| [^|]*\`${name}\``, "m"));
  });
});
