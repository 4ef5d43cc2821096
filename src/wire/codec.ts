import { Packr, addExtension } from "msgpackr";
import type { z } from "zod";
import { JsonFloat } from "../budget/index.js";
import { DEFAULT_MAX_JSON_DEPTH, valueTooDeep } from "../validation/json-depth.js";

/** msgpack ext type of a JsonFloat: 8 bytes, a big-endian IEEE 754 double. */
export const JSON_FLOAT_EXT_TYPE = 0x66;

/**
 * A float whose value is integral (`1.0` read from JSON text) travels as its own ext type: packed as a
 * number it would come back an integer, and the argument digest, the measured bytes and what a Python
 * executor reads would change with it.
 */
addExtension({
  Class: JsonFloat,
  type: JSON_FLOAT_EXT_TYPE,
  pack: (f: JsonFloat) => {
    const bytes = Buffer.alloc(8);
    bytes.writeDoubleBE(f.value);
    return bytes;
  },
  unpack: (bytes: Uint8Array) => new JsonFloat(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).readDoubleBE(0)),
});

/**
 * msgpack on the wire. Plain maps (no msgpackr records) so any msgpack implementation can read a
 * message; every decoded message is validated by its zod schema before anyone trusts it.
 * Integers are exact: int64/uint64 beyond 2**53 decode to a bigint (`auto`), and a bigint beyond 64 bits
 * travels as msgpackr's bigint ext type (0x42).
 */
const packr = new Packr({
  useRecords: false,
  mapsAsObjects: true,
  int64AsType: "auto" as "bigint", // msgpackr's type declarations lack "auto": a number up to 2**53, a bigint beyond
  useBigIntExtension: true,
});

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

/**
 * Decodes and validates; throws `MalformedMessageError` with the reason on anything else. `maxDepth` bounds
 * the nesting: a message's by default, STORED_MAX_JSON_DEPTH for a record toolgate stored itself.
 */
export function decode<S extends z.ZodType>(schema: S, data: Uint8Array, maxDepth = DEFAULT_MAX_JSON_DEPTH): z.output<S> {
  let value: unknown;
  try {
    value = packr.unpack(data);
  } catch (err) {
    throw new MalformedMessageError(`not msgpack: ${(err as Error).message}`);
  }
  // Everything downstream (canonical JSON, projections) recurses: refuse deep values here, once.
  if (valueTooDeep(value, maxDepth)) throw new MalformedMessageError(`nested deeper than ${maxDepth} levels`);
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => ({ path: i.path.join("."), message: i.message }));
    throw new MalformedMessageError(`invalid message: ${issues.map((i) => `${i.path || "(root)"}: ${i.message}`).join("; ")}`, issues);
  }
  return parsed.data;
}
