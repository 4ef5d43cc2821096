import { configDefaults, defineConfig } from "vitest/config";
import { BROWSER_SUITES, browserSuitesLeftOut, LEFT_OUT_NOTICE } from "./test/helpers/browser-suites.js";

if (browserSuitesLeftOut) process.stderr.write(`${LEFT_OUT_NOTICE}\n`);

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    exclude: browserSuitesLeftOut ? [...configDefaults.exclude, ...BROWSER_SUITES] : configDefaults.exclude,
    reporters: ["default", "./test/helpers/summary-reporter.ts"],
    // Integration suites each spawn their own nats-server; two cores, so keep parallelism modest.
    pool: "forks",
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
