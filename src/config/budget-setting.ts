import { z } from "zod";

// TODO(merge budget): replace by the budget engine's schema from ../budget/index.js once it lands.
export const MaxResultContextBytesSchema = z
  .number()
  .int()
  .min(1024)
  .max(32768)
  .default(16384)
  .describe("Byte budget of the result's compact JSON (UTF-8) when it first enters execution history");
