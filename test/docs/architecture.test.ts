import { existsSync, readdirSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

const root = new URL("../../", import.meta.url);
const architecture = readFileSync(new URL("docs/architecture.md", root), "utf8");

/** Every folder under `src/`, at any depth, as `src/a/b/`. */
function sourceFolders(dir = "src"): string[] {
  return readdirSync(new URL(`${dir}/`, root), { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .flatMap((entry) => [`${dir}/${entry.name}/`, ...sourceFolders(`${dir}/${entry.name}`)]);
}

/** The first cell of each row of the "Modules" table: `src/a/`. */
function tableFolders(): string[] {
  const section = architecture.split(/^## /m).find((s) => s.startsWith("Modules\n"));
  if (section === undefined) throw new Error('docs/architecture.md has no "## Modules" section');
  return [...section.matchAll(/^\| `(src\/[^`]*)` \|/gm)].map((m) => m[1]!);
}

describe("docs/architecture.md", () => {
  it("lists every folder of src/ in its Modules table, and no folder that is not there", () => {
    const folders = sourceFolders();
    const listed = tableFolders();
    expect(
      listed.filter((f) => !folders.includes(f)),
      "rows naming a folder src/ does not have",
    ).toEqual([]);
    expect(
      folders.filter((f) => !listed.includes(f)),
      "folders of src/ with no row in the Modules table",
    ).toEqual([]);
    expect(
      listed.filter((f, i) => listed.indexOf(f) !== i),
      "folders listed twice",
    ).toEqual([]);
  });
});

describe("paths named in the docs", () => {
  // A path in backticks (`src/kv/buckets.ts`, `test/execution/`) must exist, so a move cannot leave a doc pointing nowhere.
  const readmes = ["README.md", "streams/README.md", "examples/README.md", "deploy/k8s/README.md"];
  const docs = [
    ...readmes,
    ...readdirSync(new URL("docs/", root))
      .filter((name) => name.endsWith(".md"))
      .map((name) => `docs/${name}`),
  ];

  it("name only files and folders of the repository", () => {
    const missing = docs.flatMap((doc) =>
      [...readFileSync(new URL(doc, root), "utf8").matchAll(/`((?:src|test|bench|examples)\/[A-Za-z0-9_./-]*)`/g)]
        .map((m) => m[1]!)
        .filter((path) => !existsSync(new URL(path, root)))
        .map((path) => `${doc}: ${path}`),
    );
    expect(missing).toEqual([]);
  });
});
