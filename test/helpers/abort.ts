/**
 * Runs `fn` when `signal` aborts, or at once if it already has. A task cancel can reach the runner
 * between `accepted` being confirmed and the handler starting: the handler's signal is then already
 * aborted, and a listener added afterwards would never fire.
 */
export function onAbort(signal: AbortSignal, fn: () => void): void {
  if (signal.aborted) fn();
  else signal.addEventListener("abort", fn, { once: true });
}
