/**
 * The source trees toolgate is measured from: the current one, and for a before/after run
 * (`BENCH_BASELINE_REF=<commit>`) a second one checked out at that ref in a temporary git worktree,
 * reusing this tree's node_modules (a symlink: `npm ci` would take minutes) and built with its own
 * `npm run build`. Each tree's gateway runs from its `dist/`, its executors from its
 * `bench/lib/e2e-executor.ts` (env NATS_URL, BENCH_EXECUTOR, BENCH_EXECUTORS, BENCH_MAX_CONCURRENT,
 * BENCH_DIR; prints `ready`): so the old protocol runs against the old gateway.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

export interface ToolgateTree {
  /** `""` for the current tree, `@<short commit>` for a baseline. */
  readonly label: string;
  readonly root: string;
  /** The commit it was checked out at (the current tree: HEAD, plus `+changes` if the work tree differs). */
  readonly commit: string;
  /** Removes a baseline's worktree (nothing for the current tree). */
  remove(): void;
}

const git = (cwd: string, ...args: string[]) => execFileSync("git", args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim();

export function currentTree(root: string): ToolgateTree {
  const dirty = git(root, "status", "--porcelain", "--untracked-files=no") !== "";
  return { label: "", root, commit: `${git(root, "rev-parse", "--short", "HEAD")}${dirty ? "+changes" : ""}`, remove: () => {} };
}

/** `git worktree add --detach` of `ref` into a temporary directory, node_modules linked from `root`. */
export function checkoutBaseline(root: string, ref: string, log: (line: string) => void): ToolgateTree {
  const commit = git(root, "rev-parse", "--short", `${ref}^{commit}`);
  const dir = mkdtempSync(join(tmpdir(), `toolgate-bench-baseline-${commit}-`));
  log(`baseline: git worktree add ${dir} ${commit}`);
  git(root, "worktree", "add", "--detach", dir, commit);
  symlinkSync(join(root, "node_modules"), join(dir, "node_modules"), "dir");
  if (git(root, "diff", "--name-only", commit, "--", "package-lock.json") !== "") {
    log(`baseline: warning: package-lock.json differs between ${commit} and this tree; the baseline runs with this tree's node_modules`);
  }
  if (!existsSync(join(dir, "bench/lib/e2e-executor.ts"))) throw new Error(`${ref} has no bench/lib/e2e-executor.ts: pick a later baseline`);
  return {
    label: `@${commit}`,
    root: dir,
    commit,
    remove() {
      if (process.env.BENCH_KEEP) return log(`baseline kept in ${dir} (BENCH_KEEP); git worktree remove --force ${dir} when done`);
      git(root, "worktree", "remove", "--force", dir);
    },
  };
}

/** `npm run build` in the tree: the gateway runs from `dist/`, as deployed. */
export function buildTree(tree: ToolgateTree, log: (line: string) => void): void {
  log(`build: npm run build in ${tree.label || "this tree"}`);
  execFileSync("npm", ["run", "--silent", "build"], { cwd: tree.root, stdio: ["ignore", "ignore", "inherit"] });
}

/** A module of the tree's `dist/` (its names for buckets, permissions...), so each tree is driven by its own. */
export async function importFromTree<T>(tree: ToolgateTree, distPath: string): Promise<T> {
  return (await import(pathToFileURL(join(tree.root, "dist", distPath)).href)) as T;
}
