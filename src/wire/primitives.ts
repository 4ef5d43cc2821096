import { z } from "zod";

/**
 * The small shapes every part of toolgate speaks in: the executor protocol's messages, the stored
 * records, the configuration objects and the HTTP API. Written here once, so a limit cannot be one
 * number in one place and another elsewhere.
 */

/** An id that is also one NATS subject token and one KV key token: no dots, wildcards or whitespace. */
export const ID_TOKEN = /^[A-Za-z0-9_-]{1,128}$/;
export const Id = z.string().regex(ID_TOKEN, "use 1-128 characters of A-Z a-z 0-9 _ - (no dots, spaces or wildcards: it is a NATS key token)");

/** `<agent>.<n>`: an agent id and the version's number; the agent is readable from it, so scope checks need no lookup. */
export const AGENT_VERSION_ID_MAX_LENGTH = 140;
export const AgentVersionId = z
  .string()
  .max(AGENT_VERSION_ID_MAX_LENGTH)
  .regex(/^[A-Za-z0-9_-]+\.[1-9][0-9]*$/, "an agent version id looks like <agent>.<n>, e.g. support-bot.3, as returned on publish");

/** Milliseconds since the epoch. */
export const Millis = z.number().int().nonnegative();

/** A sha256 in lowercase hex. */
export const Sha256Hex = z.string().regex(/^[0-9a-f]{64}$/, "must be a sha256 in lowercase hex (64 characters)");

/** `read` tools have no side effects; `write` tools go through grant/accepted. */
export const ToolKind = z.enum(["read", "write"]);
export type ToolKind = z.infer<typeof ToolKind>;

/**
 * Characters of a tool name: what model APIs allow for a function name (OpenAI and Anthropic:
 * `^[a-zA-Z0-9_-]{1,64}$`), so a toolgate name (its dots mapped to `__` by `ModelTools`) fits them.
 */
export const TOOL_NAME_MAX_LENGTH = 64;
/** Dot-separated segments, e.g. `tasks.read`. */
export const ToolName = z
  .string()
  .max(TOOL_NAME_MAX_LENGTH, `at most ${TOOL_NAME_MAX_LENGTH} characters`)
  .regex(
    /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/,
    `use dot-separated segments of A-Z a-z 0-9 _ - such as tasks.read (at most ${TOOL_NAME_MAX_LENGTH} characters)`,
  );

/** The product's idempotency key of an operation (the grant's `operation_key`). */
export const OPERATION_KEY_MAX_LENGTH = 256;
export const OperationKey = z.string().min(1).max(OPERATION_KEY_MAX_LENGTH);

/** The error of a refused, failed or reconciliation_required receipt, and of an operator's failed settlement. */
export const ErrorBody = z.object({ code: z.string().max(128), message: z.string().max(4096) }).strict();
/** Why something was cancelled (a receipt, a task cancel, an operator's settlement). */
export const Reason = z.string().max(4096);

/**
 * A message that holds one item, or several sent as one message (a list of at least `min`): receipt
 * answers given together, the run events of one write. Read with `itemsOf`.
 */
export function oneOrMany<S extends z.ZodType>(schema: S, min: number) {
  return z.union([schema, z.array(schema).min(min)]);
}

/** The items a `oneOrMany` message holds, in order. */
export function itemsOf<T>(message: T | T[]): T[] {
  return Array.isArray(message) ? message : [message];
}
