/** The size of what the model sees in a run, in bytes and estimated tokens, and the compaction decision. */
import { z } from "zod";
import { bytesPerToken, type Calibration } from "./estimator.js";

export const ContextWindowSchema = z
  .object({
    run_id: z.string(),
    agent_version: z.string(),
    bytes: z.int().nonnegative().describe("history_bytes + prompt_text_bytes"),
    history_bytes: z.int().nonnegative().describe("retained_bytes of the stored projections of the run's completed tool calls, from compacted_tool_calls on"),
    prompt_text_bytes: z.int().nonnegative().describe("UTF-8 bytes of the prompt text beside tool results, as last reported (0 before any report)"),
    compacted_tool_calls: z.int().nonnegative().describe("Leading tool calls the runtime has compacted away; their projections no longer count"),
    estimated_tokens: z.int().nonnegative().describe("ceil(bytes / bytes_per_token)"),
    max_context_tokens: z.int().positive().describe("The input window of the agent version"),
    bytes_per_token: z.number().positive().describe("Median of the agent version's recent usage reports; a conservative default before any"),
    calibrated_from: z.int().nonnegative().describe("Usage reports of the agent version taken in so far"),
    must_compact: z.boolean().describe("estimated_tokens > max_context_tokens: the next request must be compacted"),
  })
  .meta({ title: "ContextWindow" });
export type ContextWindow = z.infer<typeof ContextWindowSchema>;

export interface WindowInputs {
  run_id: string;
  agent_version: string;
  history_bytes: number;
  prompt_text_bytes: number;
  compacted_tool_calls: number;
  max_context_tokens: number;
  calibration: Calibration;
}

export function contextWindow(inputs: WindowInputs): ContextWindow {
  const { calibration, ...rest } = inputs;
  const bytes = inputs.history_bytes + inputs.prompt_text_bytes;
  const ratio = bytesPerToken(calibration);
  const estimated = Math.ceil(bytes / ratio);
  return {
    ...rest,
    bytes,
    estimated_tokens: estimated,
    bytes_per_token: ratio,
    calibrated_from: calibration.reports,
    must_compact: estimated > inputs.max_context_tokens,
  };
}
