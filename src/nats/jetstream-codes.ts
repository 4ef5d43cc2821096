import { JetStreamApiCodes } from "@nats-io/jetstream";

/**
 * The JetStream API error codes toolgate acts on: the client's `JetStreamApiCodes`, plus the few it
 * does not name yet, under the server's own names (nats-server's errors.json).
 */
export const JsApiCodes = {
  ...JetStreamApiCodes,
  /** `JSSequenceNotFoundErrF`: "sequence N not found", a hole inside a stream. */
  SequenceNotFound: 10043,
  /** `JSStreamMsgDeleteFailedF`: a message delete that failed, e.g. "store EOF" past a stream's end. */
  StreamMsgDeleteFailed: 10057,
  /** `JSStreamExpectedLastSeqPerSubjectNotReady` (2.11+, HTTP 503): the check cannot be made right now; retry. */
  ExpectedLastSeqPerSubjectNotReady: 10163,
} as const;

const codeOf = (err: unknown): unknown => (err as { code?: unknown } | undefined)?.code;

/**
 * A compare-and-set that lost: the expected revision (last sequence per subject) was not the
 * current one, so someone else wrote first. A single-replica stream answers 10071 ("wrong last
 * sequence: N"); a replicated stream on 2.12+ answers 10164 ("wrong last sequence", no number) when
 * it refuses a write while another one to the same subject is still being agreed on in raft.
 */
export function isRevisionConflict(err: unknown): boolean {
  const code = codeOf(err);
  return code === JsApiCodes.StreamWrongLastSequence || code === JsApiCodes.StreamWrongLastSequenceUnknown;
}

/** A compare-and-set the server could not check yet (2.11's 10163): nothing was written, try again. */
export function isRevisionCheckUnavailable(err: unknown): boolean {
  return codeOf(err) === JsApiCodes.ExpectedLastSeqPerSubjectNotReady;
}

/** The delete of a message that is not there (any more): taken from a work queue, or already deleted. */
export function isMessageGone(err: unknown): boolean {
  const code = codeOf(err);
  return code === JsApiCodes.SequenceNotFound || code === JsApiCodes.NoMessageFound || code === JsApiCodes.StreamMsgDeleteFailed;
}
