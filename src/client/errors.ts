import type { HttpErrorCode } from "../errors/catalogue.js";
import type { ErrorDetail } from "../errors/toolgate-error.js";
import { ErrorBodySchema } from "../http/errors.js";

/** A catalogue code, or another string from a newer gateway (`http_error` when the body was not the gateway's). */
export type GatewayErrorCode = HttpErrorCode | "http_error" | (string & {});

/**
 * A non-2xx answer of the gateway, as a caller (agent client, runner) receives it: the HTTP status and
 * the catalogue `code` of the gateway's error body, its message and field details.
 */
export class GatewayError extends Error {
  override readonly name = "GatewayError";
  constructor(
    readonly status: number,
    readonly code: GatewayErrorCode,
    message: string,
    readonly details?: ErrorDetail[],
    /** Seconds the gateway asked to wait (`Retry-After`), on a 429 or 503. */
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
  }

  /** Reads the gateway's error body; a body of another shape becomes `http_error`. */
  static async fromResponse(response: Response, what: string): Promise<GatewayError> {
    const body: unknown = await response.json().catch(() => null);
    const error = ErrorBodySchema.safeParse(body);
    const retryAfter = Number(response.headers.get("retry-after") ?? NaN);
    const seconds = Number.isFinite(retryAfter) && retryAfter >= 0 ? retryAfter : undefined;
    return error.success
      ? new GatewayError(response.status, error.data.error.code, error.data.error.message, error.data.error.details, seconds)
      : new GatewayError(response.status, "http_error", `${what} answered HTTP ${response.status}`, undefined, seconds);
  }
}
