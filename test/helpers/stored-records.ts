import type { NatsConnection } from "@nats-io/transport-node";
import { Kvm } from "@nats-io/kv";
import { AssignmentRecord, ProgressEntry } from "../../src/execution/model/records.js";
import { EXECUTION_BUCKETS } from "../../src/streams/names.js";
import { decode } from "../../src/wire/codec.js";

/** What the gateway stored, read straight from its buckets: a test's look behind the API. */
const bucket = (nc: NatsConnection, role: keyof typeof EXECUTION_BUCKETS) => new Kvm(nc).open(EXECUTION_BUCKETS[role]);

/** The assignment record as stored (it must exist). */
export async function storedAssignment(nc: NatsConnection, assignmentId: string): Promise<AssignmentRecord> {
  const entry = await (await bucket(nc, "assignments")).get(assignmentId);
  if (!entry || entry.operation !== "PUT") throw new Error(`assignment ${assignmentId} is not stored`);
  return decode(AssignmentRecord, entry.value);
}

/** The progress bucket's entry of an assignment's seq, or null. */
export async function storedProgressEntry(nc: NatsConnection, assignmentId: string, seq: number): Promise<ProgressEntry | null> {
  const entry = await (await bucket(nc, "progress")).get(`${assignmentId}.${seq}`);
  return entry?.operation === "PUT" ? decode(ProgressEntry, entry.value) : null;
}

/** Whether the receipt index holds an entry for `receiptId`. */
export async function receiptIndexed(nc: NatsConnection, receiptId: string): Promise<boolean> {
  return (await (await bucket(nc, "receiptIndex")).get(receiptId)) !== null;
}
