/** How often a command started through npm looks for the process that started it. */
const LAUNCHER_CHECK_MS = 500;

/**
 * Calls `gone` once the process that started this one has exited, when that was npm or npx
 * (`npm_command` is set in what they start). npm 11 does not pass a SIGTERM sent to it on to the
 * command it runs: `kill <pid of npx toolgate serve>` would leave the gateway running, holding its
 * port and its embedded nats-server, with nobody to stop it. Another parent (a shell, a supervisor)
 * signals the command itself, and is not watched.
 */
export function whenLauncherGone(gone: () => void): void {
  if (!process.env.npm_command) return;
  const parent = process.ppid;
  const timer = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(timer);
    gone();
  }, LAUNCHER_CHECK_MS);
  timer.unref();
}
