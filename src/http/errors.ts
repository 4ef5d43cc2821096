import { z } from "zod";
import { HTTP_ERRORS, type HttpErrorCode } from "../errors/catalogue.js";
import { ErrorDetailSchema, ToolgateError, type ErrorDetail } from "../errors/toolgate-error.js";

/**
 * The project-wide error shape, on every non-2xx response:
 * `{"error": {"code": "validation_failed", "message": "...", "details": [{path, code, message, allowed?}]}}`.
 * `code` is machine-readable and stable; `message` says what to do next.
 */
export const ErrorBodySchema = z
  .object({
    error: z.object({
      code: z.string(),
      message: z.string(),
      details: z.array(ErrorDetailSchema).optional(),
    }),
  })
  .meta({ title: "Error" });

export type ErrorBody = z.infer<typeof ErrorBodySchema>;

/** The one place a code becomes an HTTP status: the status the catalogue declares for it. */
export function httpStatus(code: HttpErrorCode): number {
  return HTTP_ERRORS[code].status;
}

/** The response body of an error. */
export function errorBody(err: ToolgateError): ErrorBody {
  return { error: { code: err.code, message: err.message, ...(err.details ? { details: err.details } : {}) } };
}

/** An error the HTTP layer itself raises (authentication, limits, body parsing), with the response headers that belong to it. */
export class ApiError extends ToolgateError {
  override readonly name = "ApiError";
  constructor(
    code: HttpErrorCode,
    message: string,
    details?: ErrorDetail[],
    /** E.g. `Retry-After` on a 429. */
    readonly headers?: Readonly<Record<string, string>>,
  ) {
    super(code, message, details);
  }
}
