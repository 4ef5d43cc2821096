import type { Reporter, TestModule } from "vitest/node";
import { browserSuitesLeftOut, LEFT_OUT_NOTICE } from "./browser-suites.js";

/**
 * Prints one plain closing line, `tests: N passed, N failed, N skipped`, after vitest's own summary,
 * so any CI that reads closing lines can count the run.
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>): void {
    let passed = 0;
    let failed = unhandledErrors.length;
    let skipped = 0;
    for (const mod of testModules) {
      const before = failed;
      for (const test of mod.children.allTests()) {
        const state = test.result().state;
        if (state === "passed") passed++;
        else if (state === "failed") failed++;
        else skipped++;
      }
      // A file that failed outside its tests (no tests, or a failing beforeAll) counts as one failure.
      if (mod.state() === "failed" && failed === before) failed++;
    }
    if (browserSuitesLeftOut) process.stdout.write(`\n${LEFT_OUT_NOTICE}`);
    process.stdout.write(`\ntests: ${passed} passed, ${failed} failed, ${skipped} skipped\n`);
  }
}
