import { z } from "zod";
import { HTTP_ERRORS, type HttpErrorCode } from "./catalogue.js";

/** One problem of a refused request or object: where, which rule, what is allowed. */
export const ErrorDetailSchema = z
  .object({
    path: z.string().describe("Where in the request, e.g. tools[0].max_result_context_bytes"),
    code: z.string(),
    message: z.string(),
    allowed: z.string().optional().describe("The allowed values or range, e.g. 1024..32768"),
  })
  .meta({ title: "ErrorDetail" });

export type ErrorDetail = z.infer<typeof ErrorDetailSchema>;

/**
 * What configuration, execution, context, dry-run and MCP code throws: a catalogue code, a message
 * that says what to do next, and optional details. It knows no transport; the HTTP layer answers it
 * with the status the catalogue declares for its code, the MCP server turns it into a tool error.
 */
export class ToolgateError extends Error {
  override readonly name: string = "ToolgateError";
  constructor(
    readonly code: HttpErrorCode,
    message: string,
    readonly details?: ErrorDetail[],
  ) {
    super(message);
  }

  /**
   * The caller can correct it (its input, or the state it asked about); otherwise the gateway failed
   * and a retry may help. Read from the class of the code's declared status (4xx), so whose fault a
   * code is stays declared once, in the catalogue.
   */
  get callerFault(): boolean {
    return HTTP_ERRORS[this.code].status < 500;
  }

  static validation(details: ErrorDetail[], message = "the request is invalid; see details"): ToolgateError {
    return new ToolgateError("validation_failed", message, details);
  }
}
