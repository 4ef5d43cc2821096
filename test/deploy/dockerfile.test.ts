import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { commands } from "../../src/cli/main.js";
import { GatewayEnvSchema } from "../../src/gateway/config.js";

/**
 * The image cannot be built on machines without a Docker engine, so its Dockerfile is checked by
 * reading: stages, user, entry point and health check against package.json and the code.
 */
interface Instruction {
  op: string;
  args: string;
}
interface Stage {
  from: string;
  name: string;
  body: Instruction[];
}

/** Dockerfile instructions: comments dropped, `\` continuations joined (the whole syntax this file uses). */
function parseDockerfile(text: string): { args: Instruction[]; stages: Stage[] } {
  const logical = text
    .replace(/\\\n/g, " ")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.startsWith("#"));
  const args: Instruction[] = [];
  const stages: Stage[] = [];
  for (const line of logical) {
    const [, op, rest] = /^(\S+)\s+(.*)$/.exec(line) ?? [];
    if (!op || rest === undefined) throw new Error(`cannot parse Dockerfile line: ${line}`);
    const ins = { op: op.toUpperCase(), args: rest.replace(/\s+/g, " ") };
    if (ins.op === "FROM") {
      const [from, as, name] = ins.args.split(" ");
      expect(as?.toUpperCase(), `every stage is named: ${line}`).toBe("AS");
      stages.push({ from: from!, name: name!, body: [] });
    } else if (stages.length === 0) args.push(ins);
    else stages.at(-1)!.body.push(ins);
  }
  return { args, stages };
}

const pkg = JSON.parse(readFileSync("package.json", "utf8")) as {
  bin: Record<string, string>;
  engines: { node: string };
  scripts: Record<string, string>;
  files: string[];
};
const { args, stages } = parseDockerfile(readFileSync("Dockerfile", "utf8"));
const stage = (name: string) => stages.find((s) => s.name === name)!;
const all = (s: Stage, op: string) => s.body.filter((i) => i.op === op).map((i) => i.args);
const runtimeEnv = Object.fromEntries(all(stage("app"), "ENV").flatMap((a) => a.split(" ").map((kv) => kv.split("=") as [string, string])));

describe("Dockerfile", () => {
  it("builds on the slim Node image of a major package.json's engines accept; the gateway is the last (default) stage", () => {
    expect(stages.map((s) => `${s.name}<-${s.from}`)).toEqual(["build<-${NODE_IMAGE}", "app<-${NODE_IMAGE}", "example-executor<-app", "runtime<-app"]);
    const image = /^NODE_IMAGE=(\S+)$/.exec(args.find((a) => a.op === "ARG")?.args ?? "")?.[1];
    expect(image).toMatch(/^node:\d+-bookworm-slim$/);
    const major = Number(/^node:(\d+)/.exec(image!)![1]);
    // The floating `<major>` tag is that major's newest release, so the major decides (`>=24`: 24 or later).
    expect(major).toBeGreaterThanOrEqual(Number(/^>=(\d+)/.exec(pkg.engines.node)![1]));
  });

  it("builds with dev dependencies and package.json's build script, then prunes to production dependencies", () => {
    const run = all(stage("build"), "RUN").join(" && ");
    expect(pkg.scripts.build).toMatch(/^tsc -p tsconfig\.build\.json( |$)/);
    expect(run).toMatch(/npm ci .*&& npm rebuild better-sqlite3 msgpackr-extract/);
    expect(run).toContain("npm run build");
    expect(run).toContain("npx tsc -p tsconfig.examples.json");
    expect(run).toMatch(/npm prune --omit=dev/);
    expect(run.indexOf("npm run build")).toBeLessThan(run.indexOf("npm prune"));
    const copied = all(stage("build"), "COPY").join(" ");
    for (const f of ["package.json", "package-lock.json", "tsconfig.json", "tsconfig.build.json", "tsconfig.examples.json", "src", "examples"])
      expect(copied).toContain(f);
  });

  it("ships what package.json publishes (files) plus the pruned node_modules, and builds nothing after the build stage", () => {
    const copies = all(stage("app"), "COPY");
    expect(copies).toContain("--from=build /app/node_modules ./node_modules");
    expect(copies).toContain("--from=build /app/dist ./dist");
    expect(copies).toContain("package.json ./");
    for (const f of pkg.files.filter((f) => f !== "dist")) expect(copies).toContain(`${f} ./${f}`);
    for (const s of stages.slice(1)) expect(all(s, "RUN").join(" ")).not.toMatch(/npm (ci|install)|apt-get/);
  });

  it("runs 'toolgate serve' from package.json's bin as a numeric non-root user, listening on all interfaces", () => {
    const user = stages.flatMap((s) => all(s, "USER"));
    expect(user).toHaveLength(1);
    expect(user[0]).toMatch(/^[1-9]\d*:[1-9]\d*$/);
    expect(JSON.parse(all(stage("runtime"), "ENTRYPOINT")[0]!)).toEqual(["node", `/app/${pkg.bin.toolgate!.replace(/^\.\//, "")}`]);
    const cmd = JSON.parse(all(stage("runtime"), "CMD")[0]!) as string[];
    expect(cmd).toEqual(["serve"]);
    expect(commands.map((c) => c.name)).toContain(cmd[0]);
    expect(readFileSync(pkg.bin.toolgate!, "utf8")).toContain('import("../dist/cli/main.js")');
    expect(runtimeEnv.TOOLGATE_HTTP_HOST).toBe("0.0.0.0");
  });

  it("sets only valid gateway variables, exposes the HTTP port and checks /healthz on it with node", () => {
    expect(stage("runtime").body.map((i) => i.op)).toEqual(["EXPOSE", "HEALTHCHECK", "ENTRYPOINT", "CMD"]);
    const toolgateEnv = Object.fromEntries(Object.entries(runtimeEnv).filter(([k]) => k.startsWith("TOOLGATE_")));
    for (const name of Object.keys(toolgateEnv)) expect(Object.keys(GatewayEnvSchema.shape), name).toContain(name);
    const config = GatewayEnvSchema.parse(toolgateEnv);
    expect(all(stage("runtime"), "EXPOSE")[0]!.split(" ")).toContain(String(config.TOOLGATE_HTTP_PORT));
    const health = all(stage("runtime"), "HEALTHCHECK")[0]!;
    expect(health).toMatch(/^--interval=\S+ --timeout=\S+ --start-period=\S+ --retries=\d+ CMD \[/);
    const probe = JSON.parse(health.slice(health.indexOf("CMD ") + 4)) as string[];
    expect(probe.slice(0, 2)).toEqual(["node", "-e"]);
    expect(probe[2]).toContain("/healthz");
    expect(probe[2]).toContain("process.env.TOOLGATE_HTTP_PORT");
  });

  it("has an example-executor target running the compiled examples/tasks-executor.ts with a writable store", () => {
    const example = stage("example-executor");
    expect(all(example, "COPY")).toEqual(["--from=build /app/dist-examples ./dist-examples"]);
    const tsconfig = JSON.parse(readFileSync("tsconfig.examples.json", "utf8")) as { compilerOptions: { outDir: string; rootDir: string }; include: string[] };
    expect(tsconfig).toMatchObject({ compilerOptions: { outDir: "dist-examples", rootDir: "." }, include: ["examples"] });
    expect(JSON.parse(all(example, "ENTRYPOINT")[0]!)).toEqual(["node", "/app/dist-examples/examples/tasks-executor.js"]);
    expect(readFileSync("examples/tasks-executor.ts", "utf8")).toContain("process.env.RUNNER_STORE");
    expect(all(example, "ENV")).toEqual([`RUNNER_STORE=${runtimeEnv.TOOLGATE_DATA_DIR}/tasks-executor.db`]);
  });

  it("sends only the files the build copies as its context (.dockerignore)", () => {
    const lines = readFileSync(".dockerignore", "utf8")
      .split("\n")
      .filter((l) => l && !l.startsWith("#"));
    expect(lines[0]).toBe("**");
    const included = lines.slice(1).map((l) => l.replace(/^!/, "").replace(/\/\*\*$/, ""));
    const fromContext = stages.flatMap((s) =>
      all(s, "COPY")
        .filter((c) => !c.startsWith("--from"))
        .flatMap((c) => c.split(" ").slice(0, -1)),
    );
    expect(new Set(fromContext)).toEqual(new Set(included));
  });
});
