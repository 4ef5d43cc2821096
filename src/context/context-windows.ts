import type { NatsConnection } from "@nats-io/transport-node";
import { z } from "zod";
import { ToolgateError } from "../errors/toolgate-error.js";
import type { Execution } from "../execution/execution.js";
import type { RunRecord } from "../execution/model/records.js";
import { bucketStores } from "../kv/buckets.js";
import { CONTEXT_BUCKETS } from "../streams/names.js";
import type { VersionedStore } from "../kv/versioned-store.js";
import { CalibrationSchema, emptyCalibration, withSample, type Calibration } from "./estimator.js";
import type { UsageReport } from "./usage-report.js";
import { contextWindow, type ContextWindow } from "./window.js";

/** The latest usage of one run, keyed by run id. */
export const RunContextSchema = z
  .object({
    run_id: z.string(),
    prompt_text_bytes: z.int().nonnegative(),
    compacted_tool_calls: z.int().nonnegative(),
    reports: z.int().nonnegative(),
    updated_at: z.int().nonnegative(),
  })
  .strict();
export type RunContext = z.infer<typeof RunContextSchema>;

const emptyRunContext = (runId: string): RunContext => ({ run_id: runId, prompt_text_bytes: 0, compacted_tool_calls: 0, reports: 0, updated_at: 0 });

/** Writes `change(current)` by compare-and-set, starting from `initial` when the key does not exist yet. */
async function upsert<T>(store: VersionedStore<T>, key: string, initial: T, change: (current: T) => T): Promise<T> {
  for (;;) {
    const res = await store.mutate(key, (current) => ({ write: change(current), result: undefined }));
    if (res) return res.value;
    const value = change(initial);
    if ((await store.create(key, value)).created) return value;
    // Another gateway created it in between: change what it wrote.
  }
}

/**
 * The size of each run's context: the stored projections of its completed tool calls (read, never
 * recomputed: a stored projection is never regenerated) plus the prompt text its runtime last
 * reported; and the per-agent-version bytes-per-token calibration that turns it into tokens.
 */
export class ContextWindows {
  constructor(
    private readonly execution: Pick<Execution, "runs" | "history">,
    private readonly agentVersions: { getAgentVersion(id: string): Promise<{ max_context_tokens: number } | null> },
    private readonly runContexts: VersionedStore<RunContext>,
    private readonly ratios: VersionedStore<Calibration>,
    private readonly now: () => number = Date.now,
  ) {}

  static async open(
    nc: NatsConnection,
    execution: Pick<Execution, "runs" | "history">,
    agentVersions: ContextWindows["agentVersions"],
  ): Promise<ContextWindows> {
    const open = await bucketStores(nc);
    return new ContextWindows(
      execution,
      agentVersions,
      await open(CONTEXT_BUCKETS.runs, RunContextSchema),
      await open(CONTEXT_BUCKETS.ratios, CalibrationSchema),
    );
  }

  async view(runId: string): Promise<ContextWindow> {
    const run = await this.execution.runs.get(runId);
    const [usage, calibration] = await Promise.all([this.runContexts.get(runId), this.ratios.get(run.agent_version)]);
    const current = usage?.value ?? emptyRunContext(runId);
    return this.window(run, current, await this.historyBytes(run, current.compacted_tool_calls), calibration?.value ?? emptyCalibration(run.agent_version));
  }

  /**
   * Takes in one model call's usage: its sample is the bytes the gateway counts for the run now
   * divided by the billed input tokens, so the ratio is calibrated on exactly the quantity it is
   * later applied to (tool result envelopes, tool definitions and tokenizer all folded in).
   */
  async report(runId: string, usage: UsageReport): Promise<ContextWindow> {
    const run = await this.execution.runs.get(runId);
    if (usage.compacted_tool_calls !== undefined && usage.compacted_tool_calls > run.assignment_ids.length)
      throw ToolgateError.validation([
        {
          path: "compacted_tool_calls",
          code: "too_big",
          message: `run '${runId}' has ${run.assignment_ids.length} tool calls`,
          allowed: `0..${run.assignment_ids.length}`,
        },
      ]);
    const compacted = Math.max(usage.compacted_tool_calls ?? 0, (await this.runContexts.get(runId))?.value.compacted_tool_calls ?? 0);
    const historyBytes = await this.historyBytes(run, compacted);
    const sample = (historyBytes + usage.prompt_text_bytes) / usage.input_tokens;
    const at = this.now();
    const calibration = await upsert(this.ratios, run.agent_version, emptyCalibration(run.agent_version), (c) => withSample(c, sample, at));
    const current = await upsert(this.runContexts, runId, emptyRunContext(runId), (c) => ({
      ...c,
      prompt_text_bytes: usage.prompt_text_bytes,
      compacted_tool_calls: Math.max(c.compacted_tool_calls, compacted),
      reports: c.reports + 1,
      updated_at: at,
    }));
    return this.window(run, current, historyBytes, calibration);
  }

  private async window(run: RunRecord, usage: RunContext, historyBytes: number, calibration: Calibration): Promise<ContextWindow> {
    const agentVersion = await this.agentVersions.getAgentVersion(run.agent_version);
    if (!agentVersion)
      throw new ToolgateError("agent_version_missing", `agent version '${run.agent_version}' of run '${run.run_id}' is missing from the store`);
    return contextWindow({
      run_id: run.run_id,
      agent_version: run.agent_version,
      history_bytes: historyBytes,
      prompt_text_bytes: usage.prompt_text_bytes,
      compacted_tool_calls: usage.compacted_tool_calls,
      max_context_tokens: agentVersion.max_context_tokens,
      calibration,
    });
  }

  /** Bytes of the stored projections the model still sees: tool calls after the compacted ones, and the task results that follow them. */
  private async historyBytes(run: RunRecord, compacted: number): Promise<number> {
    const { tool_calls, task_results } = await this.execution.history.history(run);
    const seen = [...tool_calls.slice(compacted), ...task_results.filter((t) => t.after_tool_calls >= compacted)];
    return seen.reduce((sum, entry) => sum + (entry.context_preview?.retained_bytes ?? 0), 0);
  }
}
