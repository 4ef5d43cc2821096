import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadDefinitions } from "../../src/streams/index.js";
import {
  CONFIG_BUCKET,
  CONTEXT_BUCKETS,
  CONTROL_REQUEST_CONSUMER,
  EXECUTION_BUCKETS,
  EXECUTORS_BUCKET,
  RECEIPT_CONSUMER,
  STREAMS,
} from "../../src/streams/names.js";

const SRC = new URL("../../src/", import.meta.url).pathname;
const CATALOGUE = "streams/names.ts";

function sources(dir: string): { file: string; text: string }[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory()
      ? sources(join(dir, e.name))
      : e.name.endsWith(".ts")
        ? [{ file: join(dir, e.name).slice(SRC.length), text: readFileSync(join(dir, e.name), "utf8") }]
        : [],
  );
}

describe("the catalogue of stream, bucket and consumer names", () => {
  it("names exactly what streams/ declares", () => {
    const declared = loadDefinitions().map((d) =>
      d.kind === "stream" ? `stream ${d.name}` : d.kind === "kv" ? `kv ${d.bucket}` : `consumer ${d.stream}/${d.durable_name}`,
    );
    const named = [
      ...Object.values(STREAMS).map((s) => `stream ${s}`),
      ...[...Object.values(EXECUTION_BUCKETS), CONFIG_BUCKET, EXECUTORS_BUCKET, ...Object.values(CONTEXT_BUCKETS)].map((b) => `kv ${b}`),
      `consumer ${STREAMS.receipts}/${RECEIPT_CONSUMER}`,
      `consumer ${STREAMS.control}/${CONTROL_REQUEST_CONSUMER}`,
    ];
    expect(named.sort()).toEqual(declared.sort());
  });

  it("is the only place in src/ that spells one (or a bucket's stream, KV_<bucket>)", () => {
    const spelled = /["'](?:TG_[A-Z]+|tg_[a-z_]+)["']|`KV_\$\{/g;
    const found = sources(SRC)
      .filter((s) => s.file !== CATALOGUE)
      .flatMap((s) => [...s.text.matchAll(spelled)].map((m) => `${s.file}: ${m[0]}`));
    expect(found).toEqual([]);
  });
});
