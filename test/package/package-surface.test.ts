import { execFile } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const REPO = resolve(import.meta.dirname, "../..");
const manifest = JSON.parse(readFileSync(join(REPO, "package.json"), "utf8")) as {
  name: string;
  bin: { toolgate: string };
  exports: Record<string, { types: string; default: string }>;
};

/**
 * The package as a user receives it: `npm pack` (which builds), the tarball unpacked into an empty
 * folder's node_modules the way npm lays it out, its dependencies linked from this repository's
 * node_modules (so the test does not download), then every `exports` entry imported and the bin run
 * from that folder.
 */
describe("the packed package", () => {
  let folder: string;
  let installed: string;

  beforeAll(async () => {
    folder = mkdtempSync(join(tmpdir(), "toolgate-pack-"));
    const { stdout } = await run("npm", ["pack", "--json", "--pack-destination", folder], { cwd: REPO, maxBuffer: 64 * 1024 * 1024 });
    const [{ filename }] = JSON.parse(stdout.slice(stdout.indexOf("["))) as [{ filename: string }];
    const modules = join(folder, "node_modules");
    mkdirSync(modules);
    for (const entry of readdirSync(join(REPO, "node_modules"))) {
      if (entry !== manifest.name && !entry.startsWith(".")) symlinkSync(join(REPO, "node_modules", entry), join(modules, entry));
    }
    await run("tar", ["-xzf", join(folder, filename), "-C", folder]);
    installed = join(modules, manifest.name);
    await run("mv", [join(folder, "package"), installed]);
  }, 300_000);

  afterAll(() => {
    if (folder) rmSync(folder, { recursive: true, force: true });
  });

  /** The names an entry exports, imported by Node from the empty folder (not through vitest). */
  async function exportedNames(specifier: string): Promise<string[]> {
    const script = `const m = await import(${JSON.stringify(specifier)}); console.log(JSON.stringify(Object.keys(m)));`;
    const { stdout } = await run(process.execPath, ["--input-type=module", "-e", script], { cwd: folder });
    return JSON.parse(stdout) as string[];
  }

  it("holds the built code, its type declarations, the stream definitions and the console assets", () => {
    for (const [entry, target] of Object.entries(manifest.exports)) {
      expect(existsSync(join(installed, target.default)), `${entry} -> ${target.default}`).toBe(true);
      expect(existsSync(join(installed, target.types)), `${entry} -> ${target.types}`).toBe(true);
    }
    expect(readdirSync(join(installed, "streams")).length).toBeGreaterThan(0);
    expect(readdirSync(join(installed, "dist/console/assets")).sort()).toEqual(readdirSync(join(REPO, "src/console/assets")).sort());
    if (existsSync(join(REPO, "LICENSE"))) expect(existsSync(join(installed, "LICENSE"))).toBe(true);
    // Nothing of the repository's own work: no sources, tests or benchmarks.
    expect(existsSync(join(installed, "src"))).toBe(false);
    expect(existsSync(join(installed, "test"))).toBe(false);
  });

  it("imports every exports entry", async () => {
    for (const entry of Object.keys(manifest.exports)) {
      const names = await exportedNames(entry === "." ? manifest.name : `${manifest.name}/${entry.slice(2)}`);
      expect(names.length, entry).toBeGreaterThan(0);
    }
  }, 120_000);

  it("gives the gateway as a library and the error shape at the root, the executor and agent SDKs, and nothing of the server in the runner", async () => {
    const root = await exportedNames(manifest.name);
    expect(root).toEqual(expect.arrayContaining(["createGateway", "gatewayConfigFromEnv", "defineRoute", "ApiError", "ToolgateError", "ErrorBodySchema"]));
    const runner = await exportedNames(`${manifest.name}/runner`);
    expect(runner).toEqual(expect.arrayContaining(["ToolRunner", "GatewayError", "dryRun"]));
    expect(runner).not.toContain("ApiError");
    const client = await exportedNames(`${manifest.name}/client`);
    expect(client).toEqual(expect.arrayContaining(["ToolgateClient", "GatewayError", "operations"]));
  }, 120_000);

  it("runs the toolgate bin", async () => {
    const bin = join(installed, manifest.bin.toolgate);
    const { stdout } = await run(process.execPath, [bin, "--help"], { cwd: folder });
    expect(stdout).toContain("Usage: toolgate <command>");
  }, 120_000);
});
