import { GatewayError } from "./errors.js";

/** How the client retries a 429 (rate limited) or 503 (not ready): other answers are never retried. */
export interface RetryPolicy {
  /** Further attempts after the first; 0 turns retrying off. */
  retries: number;
  /** The first backoff when the gateway sends no `Retry-After`; doubled each attempt. */
  initialDelayMs: number;
  /** No wait is longer, `Retry-After` included. */
  maxDelayMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { retries: 4, initialDelayMs: 200, maxDelayMs: 10_000 };

/** Per call: an abort signal and a timeout, which end the call (its retries and waits included). */
export interface CallOptions {
  signal?: AbortSignal;
  timeoutMs?: number;
}

export function callSignal(options: CallOptions = {}): AbortSignal | undefined {
  const signals = [options.signal, options.timeoutMs === undefined ? undefined : AbortSignal.timeout(options.timeoutMs)].filter(
    (s): s is AbortSignal => s !== undefined,
  );
  return signals.length === 0 ? undefined : signals.length === 1 ? signals[0] : AbortSignal.any(signals);
}

/** Waits `ms`, or rejects with the signal's reason when it aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** The wait before retry `attempt` (0-based): the gateway's `Retry-After` when given, else exponential with jitter. */
export function backoffMs(policy: RetryPolicy, attempt: number, retryAfterSeconds?: number): number {
  const wanted = retryAfterSeconds !== undefined ? retryAfterSeconds * 1000 : policy.initialDelayMs * 2 ** attempt * (0.5 + Math.random() / 2);
  return Math.min(policy.maxDelayMs, wanted);
}

const RETRIED = new Set([429, 503]);

/**
 * Sends a request until it is answered with anything but 429/503 or the retries are spent; a non-2xx
 * answer becomes a {@link GatewayError} with the catalogue code of the gateway's error body.
 */
export async function sendWithRetry(send: () => Promise<Response>, what: string, policy: RetryPolicy, signal?: AbortSignal): Promise<Response> {
  for (let attempt = 0; ; attempt++) {
    const response = await send();
    if (response.ok) return response;
    const error = await GatewayError.fromResponse(response, what);
    if (!RETRIED.has(response.status) || attempt >= policy.retries) throw error;
    await sleep(backoffMs(policy, attempt, error.retryAfterSeconds), signal);
  }
}
