/**
 * The suites that need a browser (Chromium): only the console's end-to-end test. TOOLGATE_TEST_BROWSER=0
 * leaves them out of a run on a machine without one; the run then says so at its start and its end.
 */
export const BROWSER_SUITES = ["test/console/console.e2e.test.ts"];

export const browserSuitesLeftOut = process.env.TOOLGATE_TEST_BROWSER === "0";

export const LEFT_OUT_NOTICE = `TOOLGATE_TEST_BROWSER=0: NOT run (they need Chromium): ${BROWSER_SUITES.join(", ")}`;
