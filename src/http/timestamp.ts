import { z } from "zod";

/**
 * A time as every HTTP answer gives it: an RFC 3339 string in UTC (`2026-12-03T16:37:58.123Z`),
 * under a `*_at` (or `at`) name. Records the execution path keeps hold epoch milliseconds; a response
 * schema declares the field with this codec, which turns them into the string when the answer is
 * validated, so the OpenAPI document and `toolgate/client`'s types show the string.
 */
export const HttpTimestamp = z
  .codec(z.int().nonnegative(), z.iso.datetime(), { decode: (ms) => new Date(ms).toISOString(), encode: (iso) => Date.parse(iso) })
  .describe("RFC 3339 time, UTC");
