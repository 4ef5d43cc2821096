import type { Reporter, TestModule } from "vitest/node";
import { browserSuitesLeftOut, LEFT_OUT_NOTICE } from "./browser-suites.js";

/**
 * Prints one plain closing line, `tests: N passed, N failed, N skipped`, after vitest's own summary,
 * so any CI that reads closing lines can count the run. Under the test matrix (scripts/test-matrix.sh)
 * `TOOLGATE_TEST_RUN` names the run, the line reads `tests [<run>]: …`, and the matrix prints the
 * summed `tests:` line last.
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>): void {
    let passed = 0;
    let failed = unhandledErrors.length;
    let skipped = 0;
    for (const mod of testModules) {
      let moduleFailed = 0;
      for (const test of mod.children.allTests()) {
        const state = test.result().state;
        if (state === "passed") passed++;
        else if (state === "failed") moduleFailed++;
        else skipped++;
      }
      // A file that failed outside its tests (an import, a beforeAll hook) counts once, even when its
      // tests were only left unrun.
      failed += mod.state() === "failed" && moduleFailed === 0 ? 1 : moduleFailed;
    }
    if (browserSuitesLeftOut) process.stdout.write(`\n${LEFT_OUT_NOTICE}`);
    const run = process.env.TOOLGATE_TEST_RUN;
    process.stdout.write(`\ntests${run ? ` [${run}]` : ""}: ${passed} passed, ${failed} failed, ${skipped} skipped\n`);
  }
}
