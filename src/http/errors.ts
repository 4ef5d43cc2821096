import { z } from "zod";
import type { HttpErrorCode } from "./error-catalogue.js";

/**
 * The project-wide error shape, on every non-2xx response:
 * `{"error": {"code": "validation_failed", "message": "...", "details": [{path, code, message, allowed?}]}}`.
 * `code` is machine-readable and stable; `message` says what to do next.
 */
export const ErrorDetailSchema = z
  .object({
    path: z.string().describe("Where in the request, e.g. tools[0].max_result_context_bytes"),
    code: z.string(),
    message: z.string(),
    allowed: z.string().optional().describe("The allowed values or range, e.g. 1024..32768"),
  })
  .meta({ title: "ErrorDetail" });

export const ErrorBodySchema = z
  .object({
    error: z.object({
      code: z.string(),
      message: z.string(),
      details: z.array(ErrorDetailSchema).optional(),
    }),
  })
  .meta({ title: "Error" });

export type ErrorDetail = z.infer<typeof ErrorDetailSchema>;
export type ErrorBody = z.infer<typeof ErrorBodySchema>;

/** Thrown anywhere (routes, stores, the execution path); the HTTP layer renders it as {@link ErrorBody}. */
export class ApiError extends Error {
  override readonly name = "ApiError";
  constructor(
    readonly status: number,
    /** Declared with this status in the catalogue (`error-catalogue.ts`). */
    readonly code: HttpErrorCode,
    message: string,
    readonly details?: ErrorDetail[],
    /** Response headers that belong to the error, e.g. `Retry-After` on a 429. */
    readonly headers?: Readonly<Record<string, string>>,
  ) {
    super(message);
  }

  toBody(): ErrorBody {
    return { error: { code: this.code, message: this.message, ...(this.details ? { details: this.details } : {}) } };
  }

  static validation(details: ErrorDetail[], message = "the request is invalid; see details"): ApiError {
    return new ApiError(400, "validation_failed", message, details);
  }

  static notFound(code: HttpErrorCode, message: string): ApiError {
    return new ApiError(404, code, message);
  }

  static conflict(code: HttpErrorCode, message: string): ApiError {
    return new ApiError(409, code, message);
  }
}
