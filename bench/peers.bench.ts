/**
 * `npm run bench:peers`: toolgate side by side with what a user would pick instead, in one run,
 * alternated level by level: BullMQ on the machine's Redis, a raw JetStream work queue with a result
 * stream (2 persisted writes: the engine's own floor) and core NATS request/reply (nothing persisted),
 * each with its producer and its workers in their own processes; and toolgate's own floor, its
 * messages and writes with none of its work (bench/lib/systems/toolgate-floor-process.ts), and the
 * same with only the work its guarantees need (`toolgate-lean`). The call is the same everywhere:
 * small JSON arguments, a ~430-byte JSON result (toolgate's call adds one progress report).
 * Environment: see bench/lib/compare-bench.ts (BENCH_BASELINE_REF=<ref> adds toolgate at that ref).
 */
import { runCompareBench } from "./lib/compare-bench.js";

await runCompareBench({ bench: "peers", defaults: ["toolgate-protocol", "toolgate-runner", "toolgate-floor", "toolgate-lean", "bullmq", "jetstream", "nats"] });
