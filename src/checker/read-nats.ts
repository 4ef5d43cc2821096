import type { NatsConnection } from "@nats-io/transport-node";
import { DeliverPolicy, jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager, type JsMsg } from "@nats-io/jetstream";
import type { z } from "zod";
import { ASSIGNMENT_BUCKET_WATCH_PREFIX, EXECUTION_BUCKETS, EXECUTORS_BUCKET, kvStreamName, STREAMS } from "../streams/names.js";
import { AssignmentRecord, ProgressEntry, ProjectionRecord, ReceiptIndexEntry, RunRecord } from "../execution/model/records.js";
import { ExecutorSchema } from "../executors/schemas.js";
import { STORED_MAX_JSON_DEPTH } from "../validation/json-depth.js";
import { decode } from "../wire/codec.js";
import { ReceiptMessage, type Receipt } from "../wire/messages.js";
import { itemsOf } from "../wire/primitives.js";
import type { CreateOnlyBucket, RegistryHistory, Stamped, StoredHistory, StoredReceipt } from "./history.js";

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
    let held: Receipt[] | null = null;
    try {
      held = itemsOf(decode(ReceiptMessage, m.data));
    } catch {
      // Kept as a message that is no receipt: the gateway terminated it, the checker only counts it.
    }
    // A chain's message holds several receipts, each listed with the message's sequence.
    for (const receipt of held ?? [null]) receipts.push({ seq: m.seq, storedAt: millis(m), receipt });
  });

  /** The latest value of each key of bucket `name`, but for keys starting with `except`. */
  const bucket = async <T>(name: string, schema: z.ZodType<T>, except?: string): Promise<Array<Stamped<T>>> => {
    // Latest revision per key: a replica still catching up may deliver a revision it later replaces.
    const latest = new Map<string, Stamped<T> | null>();
    const skipped = except === undefined ? undefined : `$KV.${name}.${except}`;
    await scan(kvStreamName(name), (m) => {
      if (skipped !== undefined && m.subject.startsWith(skipped)) return;
      const op = m.headers?.get("KV-Operation");
      latest.set(
        m.subject,
        op === "DEL" || op === "PURGE" ? null : { value: decode(schema, m.data, STORED_MAX_JSON_DEPTH), revision: m.seq, storedAt: millis(m) },
      );
    });
    return [...latest.values()].filter((e): e is Stamped<T> => e !== null);
  };
  const values = async <T>(name: string, schema: z.ZodType<T>): Promise<T[]> => (await bucket(name, schema)).map((e) => e.value);

  const createOnly: CreateOnlyBucket[] = [];
  for (const name of CREATE_ONLY) {
    const { state } = await jsm.streams.info(kvStreamName(name));
    createOnly.push({ bucket: name, firstSeq: state.first_seq, lastSeq: state.last_seq, messages: state.messages });
  }
  const registry = await readRegistry(jsm, scan);
  // The lease sweeper's watches share the assignments bucket (store layout 6): they are no assignments.
  const assignments = await bucket(EXECUTION_BUCKETS.assignments, AssignmentRecord, ASSIGNMENT_BUCKET_WATCH_PREFIX);
  // Store layout 1 keeps projections in their bucket, layout 2 in the record that completed the call.
  const carried = assignments.flatMap(({ value: a }) => (a.projection ? [{ assignment_id: a.assignment_id, ...a.projection }] : []));
  return {
    ...(registry ? { registry } : {}),
    runs: await bucket(EXECUTION_BUCKETS.runs, RunRecord),
    assignments,
    receipts,
    index: await values(EXECUTION_BUCKETS.receiptIndex, ReceiptIndexEntry),
    progress: await values(EXECUTION_BUCKETS.progress, ProgressEntry),
    projections: [...(await values(EXECUTION_BUCKETS.projections, ProjectionRecord)), ...carried],
    createOnly,
  };
}

/** Every kept revision of the executor registry, or undefined when its bucket does not exist (an older deployment). */
async function readRegistry(jsm: JetStreamManager, scan: (stream: string, onMsg: (m: JsMsg) => void) => Promise<void>): Promise<RegistryHistory | undefined> {
  const stream = kvStreamName(EXECUTORS_BUCKET);
  const info = await jsm.streams.info(stream).catch(() => undefined);
  if (!info) return undefined;
  const prefix = `$KV.${EXECUTORS_BUCKET}.`;
  const revisions: RegistryHistory["revisions"] = [];
  await scan(stream, (m) => {
    const op = m.headers?.get("KV-Operation");
    const removed = op === "DEL" || op === "PURGE";
    revisions.push({
      executor_id: m.subject.slice(prefix.length),
      storedAt: millis(m),
      value: removed ? null : ExecutorSchema.parse(JSON.parse(new TextDecoder().decode(m.data))),
    });
  });
  return { keep: info.config.max_msgs_per_subject, revisions };
}

/** A scan that receives nothing for this long has stalled (a replica that cannot catch up, a consumer placed on a node just killed). */
const SCAN_IDLE_MS = 30_000;

/** Fresh consumers a stalled scan goes on with, each from the message after the last one read, before it fails. */
const SCAN_RESUMES = 2;

/** Sequences a scan looks at one by one, at most, to tell that the end of a stream holds no message. */
const TAIL_PROBES = 1_000;

/**
 * Every message of a stream up to its last sequence at the start, in order, through an ordered
 * consumer (no durable state left behind). The end is the leader's last sequence, not the
 * consumer's pending count: on a cluster the consumer may read a replica that is still catching up
 * (after a node restart), whose pending count says 0 too early. When it says 0 before that
 * sequence, the sequences left are looked up one by one on the leader: none holding a message (the
 * last ones purged, as a settled call's watch is in the assignments bucket) is the end too. A
 * stall goes on from where it was on a fresh consumer (right after a leader kill, one was seen to
 * deliver nothing at all); a scan that keeps stalling fails rather than report a partial history.
 */
async function scanStream(js: JetStreamClient, jsm: JetStreamManager, stream: string, onMsg: (m: JsMsg) => void, options: ReadOptions): Promise<void> {
  const { messages: total, last_seq: lastSeq } = (await jsm.streams.info(stream)).state;
  const every = options.progressEvery ?? 10_000;
  if (total === 0) return options.progress?.(stream, 0, 0);
  let read = 0;
  let seq = 0;
  let ended = false;
  for (let attempt = 0; attempt <= SCAN_RESUMES && seq < lastSeq && !ended; attempt++) {
    const consumer = await js.consumers.get(stream, seq > 0 ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: seq + 1 } : {});
    const messages = await consumer.consume();
    let idle: NodeJS.Timeout | undefined;
    const stuck = () => {
      clearTimeout(idle);
      idle = setTimeout(() => void messages.close(), SCAN_IDLE_MS);
    };
    stuck();
    try {
      for await (const m of messages) {
        stuck();
        onMsg(m);
        read++;
        seq = m.seq;
        if (read % every === 0) options.progress?.(stream, read, total);
        if (seq >= lastSeq) break;
        if (m.info.pending === 0 && (ended = await noMessageAfter(jsm, stream, seq, lastSeq))) break;
      }
    } finally {
      clearTimeout(idle);
      await messages.close();
    }
  }
  if (seq < lastSeq && !ended) throw new Error(`reading ${stream} stalled at sequence ${seq} of ${lastSeq}, ${SCAN_RESUMES + 1} times`);
  options.progress?.(stream, read, total);
}

/** Whether no sequence after `seq` up to `lastSeq` holds a message, asked of the stream's leader (false beyond `TAIL_PROBES` of them). */
async function noMessageAfter(jsm: JetStreamManager, stream: string, seq: number, lastSeq: number): Promise<boolean> {
  if (lastSeq - seq > TAIL_PROBES) return false;
  for (let s = lastSeq; s > seq; s--) if ((await jsm.streams.getMessage(stream, { seq: s })) !== null) return false;
  return true;
}

function millis(m: JsMsg): number {
  return Number(m.timestampNanos / 1_000_000n);
}
