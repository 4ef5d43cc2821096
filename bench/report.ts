/**
 * Prints the markdown report of a comparison bench again from its JSON results:
 *
 *   npx tsx bench/report.ts bench/results/peers-<time>.json
 */
import { readFileSync } from "node:fs";
import type { Comparison } from "./lib/compare.js";
import { markdownReport } from "./lib/compare-report.js";

const [file, ...rest] = process.argv.slice(2);
if (!file?.endsWith(".json") || rest.length > 0) throw new Error(`usage: report <bench/results/….json>; got: ${process.argv.slice(2).join(" ") || "nothing"}`);
const saved = JSON.parse(readFileSync(file, "utf8")) as Comparison & { meta: { cores: number; rate?: number } };
// A paced run's report judges no target, as when it was printed first.
console.log(markdownReport(saved, saved.meta.cores, saved.meta.rate));
