// Its own module, not the store's: the client SDK sends usage reports and must not load the KV plumbing.
import { z } from "zod";

/** What a usage report says of one model call (`POST /v1/runs/{run_id}/usage`). */
export const UsageReportSchema = z
  .strictObject({
    input_tokens: z.int().min(1).max(100_000_000).describe("The input tokens the model provider billed for the call (its usage report)"),
    prompt_text_bytes: z
      .int()
      .min(1)
      .max(1_000_000_000)
      .describe("UTF-8 bytes of everything the request held besides the run's tool results: system prompt, messages, tool definitions and calls"),
    compacted_tool_calls: z
      .int()
      .nonnegative()
      .optional()
      .describe("How many of the run's first tool calls the runtime has compacted away (folded into prompt text); never decreases. Default: unchanged"),
  })
  .meta({ title: "UsageReport" });
export type UsageReport = z.infer<typeof UsageReportSchema>;
