import type { NatsConnection } from "@nats-io/transport-node";
import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager, type JsMsg } from "@nats-io/jetstream";
import type { z } from "zod";
import { EXECUTION_BUCKETS } from "../execution/buckets.js";
import { AssignmentRecord, ProgressEntry, ProjectionRecord, ReceiptIndexEntry, RunRecord } from "../execution/records.js";
import { kvStreamName } from "../streams/index.js";
import { decode } from "../wire/codec.js";
import { Receipt } from "../wire/messages.js";
import { STREAMS } from "../wire/subjects.js";
import type { CreateOnlyBucket, Stamped, StoredHistory, StoredReceipt } from "./history.js";

export interface ReadOptions {
  /** Called every `progressEvery` messages and at the end of each stream (for stderr on large histories). */
  progress?: (stream: string, read: number, total: number) => void;
  progressEvery?: number;
}

/** Buckets written create-only: every key once, so their streams must have no sequence gaps. */
const CREATE_ONLY = [EXECUTION_BUCKETS.receiptIndex, EXECUTION_BUCKETS.progress, EXECUTION_BUCKETS.projections];

/** Reads the whole stored history from JetStream: every receipt as stored and the latest value of every record. */
export async function readHistory(nc: NatsConnection, options: ReadOptions = {}): Promise<StoredHistory> {
  const js = jetstream(nc);
  const jsm = await jetstreamManager(nc);
  const scan = (stream: string, onMsg: (m: JsMsg) => void) => scanStream(js, jsm, stream, onMsg, options);

  const receipts: StoredReceipt[] = [];
  await scan(STREAMS.receipts, (m) => {
    let receipt: Receipt | null = null;
    try {
      receipt = decode(Receipt, m.data);
    } catch {
      // Kept as a message that is no receipt: the gateway terminated it, the checker only counts it.
    }
    receipts.push({ seq: m.seq, storedAt: millis(m), receipt });
  });

  const bucket = async <T>(name: string, schema: z.ZodType<T>): Promise<Array<Stamped<T>>> => {
    const out: Array<Stamped<T>> = [];
    await scan(kvStreamName(name), (m) => {
      const op = m.headers?.get("KV-Operation");
      if (op !== "DEL" && op !== "PURGE") out.push({ value: decode(schema, m.data), revision: m.seq, storedAt: millis(m) });
    });
    return out;
  };
  const values = async <T>(name: string, schema: z.ZodType<T>): Promise<T[]> => (await bucket(name, schema)).map((e) => e.value);

  const createOnly: CreateOnlyBucket[] = [];
  for (const name of CREATE_ONLY) {
    const { state } = await jsm.streams.info(kvStreamName(name));
    createOnly.push({ bucket: name, firstSeq: state.first_seq, lastSeq: state.last_seq, messages: state.messages });
  }
  return {
    runs: await bucket(EXECUTION_BUCKETS.runs, RunRecord),
    assignments: await bucket(EXECUTION_BUCKETS.assignments, AssignmentRecord),
    receipts,
    index: await values(EXECUTION_BUCKETS.receiptIndex, ReceiptIndexEntry),
    progress: await values(EXECUTION_BUCKETS.progress, ProgressEntry),
    projections: await values(EXECUTION_BUCKETS.projections, ProjectionRecord),
    createOnly,
  };
}

/** Every message of a stream in order, through an ordered consumer (no durable state left behind). */
async function scanStream(js: JetStreamClient, jsm: JetStreamManager, stream: string, onMsg: (m: JsMsg) => void, options: ReadOptions): Promise<void> {
  const total = (await jsm.streams.info(stream)).state.messages;
  const every = options.progressEvery ?? 10_000;
  if (total === 0) return options.progress?.(stream, 0, 0);
  const consumer = await js.consumers.get(stream);
  const messages = await consumer.consume();
  let read = 0;
  for await (const m of messages) {
    onMsg(m);
    read++;
    if (read % every === 0) options.progress?.(stream, read, total);
    if (m.info.pending === 0) break;
  }
  await messages.close();
  options.progress?.(stream, read, total);
}

function millis(m: JsMsg): number {
  return Number(m.timestampNanos / 1_000_000n);
}
