import { Packr } from "msgpackr";
import type { z } from "zod";
import { DEFAULT_MAX_JSON_DEPTH, valueTooDeep } from "../validation/json-depth.js";

/**
 * msgpack on the wire. Plain maps (no msgpackr records) so any msgpack implementation can read a
 * message; every decoded message is validated by its zod schema before anyone trusts it.
 */
const packr = new Packr({ useRecords: false, mapsAsObjects: true, int64AsType: "number" });

export function encode(value: unknown): Uint8Array {
  return packr.pack(value);
}

/** Why a message was refused; never thrown past a consumer loop. */
export class MalformedMessageError extends Error {
  override readonly name = "MalformedMessageError";
  constructor(
    readonly reason: string,
    readonly issues: ReadonlyArray<{ path: string; message: string }> = [],
  ) {
    super(reason);
  }
}

/** Decodes and validates; throws `MalformedMessageError` with the reason on anything else. */
export function decode<S extends z.ZodType>(schema: S, data: Uint8Array): z.output<S> {
  let value: unknown;
  try {
    value = packr.unpack(data);
  } catch (err) {
    throw new MalformedMessageError(`not msgpack: ${(err as Error).message}`);
  }
  // Everything downstream (canonical JSON, projections) recurses: refuse deep values here, once.
  if (valueTooDeep(value, DEFAULT_MAX_JSON_DEPTH)) throw new MalformedMessageError(`nested deeper than ${DEFAULT_MAX_JSON_DEPTH} levels`);
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => ({ path: i.path.join("."), message: i.message }));
    throw new MalformedMessageError(`invalid message: ${issues.map((i) => `${i.path || "(root)"}: ${i.message}`).join("; ")}`, issues);
  }
  return parsed.data;
}
