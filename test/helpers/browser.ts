import { existsSync } from "node:fs";
import { chromium, type Browser } from "playwright-core";

/** Debian's chromium (`.ci/run` installs it); CHROMIUM_PATH points elsewhere. */
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

/** Headless Chromium with everything that would reach the network switched off: the console must work offline. */
export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM_PATH))
    throw new Error(
      `no browser at ${CHROMIUM_PATH}: install Debian's chromium (.ci/run does) or set CHROMIUM_PATH; or run the suite without this test: TOOLGATE_TEST_BROWSER=0 npm test`,
    );
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}
