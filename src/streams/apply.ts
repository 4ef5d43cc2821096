import type { JetStreamManager } from "@nats-io/jetstream";
import type { Definition } from "./definitions.js";
import { planStreams, type PlanEntry } from "./plan.js";
import { consumerConfig, streamConfig, type ObjectSpec } from "./spec.js";

export interface ApplyOptions {
  /** Replica count of every stream and bucket: 1 on one server, 3 on a cluster. */
  replicas: number;
  /** Allow changes that may lose data (shrunk limits, re-created objects). */
  force?: boolean;
  /** Plan and report only. */
  dryRun?: boolean;
  /** Called with one line per object, as it is planned and applied. */
  progress?: (line: string) => void;
}

export interface ApplyResult {
  plan: PlanEntry[];
  /** Destructive entries left alone because `force` was not given. */
  refused: PlanEntry[];
  applied: boolean;
}

/** Raised by {@link ensureStreams} when the server holds objects it must not silently change. */
export class StreamsRefusedError extends Error {
  override readonly name = "StreamsRefusedError";
  constructor(readonly refused: PlanEntry[]) {
    super(
      `refusing destructive stream changes:\n${refused.map(describeEntry).join("\n")}\n` +
        "Review them, then run 'toolgate streams apply --force' (this may delete stored messages).",
    );
  }
}

const SYMBOL: Record<PlanEntry["action"], string> = { create: "+", update: "~", recreate: "!", unchanged: "=" };

/** One line per object, e.g. `~ update stream X: max_msgs 100 -> 50 (destructive)`. */
export function describeEntry(entry: PlanEntry): string {
  const changes = entry.changes.map((c) => `${c.field} ${JSON.stringify(c.from)} -> ${JSON.stringify(c.to)}${c.effect === "update" ? "" : ` (${c.effect})`}`);
  return `${SYMBOL[entry.action]} ${entry.action} ${entry.label}${changes.length ? ": " + changes.join(", ") : ""}`;
}

async function create(jsm: JetStreamManager, desired: ObjectSpec): Promise<void> {
  if (desired.kind === "stream") await jsm.streams.add(streamConfig(desired.spec));
  else await jsm.consumers.add(desired.spec.stream, consumerConfig(desired.spec));
}

async function applyEntry(jsm: JetStreamManager, entry: PlanEntry): Promise<void> {
  const { desired } = entry;
  switch (entry.action) {
    case "unchanged":
      return;
    case "create":
      return create(jsm, desired);
    case "recreate":
      if (desired.kind === "stream") await jsm.streams.delete(desired.spec.name);
      else await jsm.consumers.delete(desired.spec.stream, desired.spec.durable_name);
      return create(jsm, desired);
    case "update":
      if (desired.kind === "stream") {
        const { name, ...config } = streamConfig(desired.spec);
        await jsm.streams.update(name, config);
      } else {
        await jsm.consumers.update(desired.spec.stream, desired.spec.durable_name, consumerConfig(desired.spec));
      }
  }
}

/**
 * Brings the server to the definitions. Plans everything first; when any entry is destructive and
 * `force` is not set, nothing at all is applied (a half-applied set is worse than none).
 * Streams precede consumers in the definitions' order, so a consumer's stream exists when it is made.
 */
export async function applyStreams(jsm: JetStreamManager, defs: Definition[], options: ApplyOptions): Promise<ApplyResult> {
  const progress = options.progress ?? (() => {});
  const ordered = [...defs.filter((d) => d.kind !== "consumer"), ...defs.filter((d) => d.kind === "consumer")];
  const plan = await planStreams(jsm, ordered, { replicas: options.replicas });
  for (const entry of plan) progress(describeEntry(entry));
  const refused = options.force ? [] : plan.filter((e) => e.destructive);
  if (options.dryRun || refused.length > 0) return { plan, refused, applied: false };
  for (const entry of plan) {
    if (entry.action === "unchanged") continue;
    await applyEntry(jsm, entry);
    progress(`  done: ${entry.action} ${entry.label}`);
  }
  return { plan, refused, applied: true };
}

/** Gateway start: apply, and stop with a clear error rather than touch data without an operator. */
export async function ensureStreams(jsm: JetStreamManager, defs: Definition[], options: Omit<ApplyOptions, "force" | "dryRun">): Promise<ApplyResult> {
  const result = await applyStreams(jsm, defs, options);
  if (result.refused.length > 0) throw new StreamsRefusedError(result.refused);
  return result;
}
