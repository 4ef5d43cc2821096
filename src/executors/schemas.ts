import { nkeys } from "@nats-io/transport-node";
import { z } from "zod";
import { BindingIdSchema, ExecutorScopeSchema, IdTokenSchema } from "../config/ids.js";

/** True for a NATS user public nkey (`U…`, 56 characters, valid checksum); a seed (`SU…`) is not one. */
export function isUserNkey(value: string): boolean {
  if (!/^U[A-Z2-7]{55}$/.test(value)) return false;
  try {
    nkeys.fromPublic(value);
    return true;
  } catch {
    return false;
  }
}

export const UserNkeySchema = z
  .string()
  .refine(isUserNkey, "a NATS user public nkey (56 characters starting with U, e.g. from 'toolgate nkey'); never send the seed (S…)")
  .describe("NATS user public nkey; the executor keeps the seed");

/** One or two keys: two while a rotation is under way (old and new both accepted until the old is removed). */
const Nkeys = z
  .array(UserNkeySchema)
  .min(1)
  .max(2)
  .refine((keys) => new Set(keys).size === keys.length, "the same nkey is listed twice")
  .describe("Public nkeys this executor may connect with: one, or two during a rotation");

export const ExecutorIdSchema = IdTokenSchema.describe("Executor id, unique across scopes (a NATS subject token)");

export const RegisterExecutorSchema = z
  .strictObject({
    executor_id: ExecutorIdSchema,
    scope: ExecutorScopeSchema,
    nkeys: Nkeys,
    bindings: z.array(BindingIdSchema).max(1024).optional().describe("Bindings it serves; each must be registered in its scope"),
    description: z.string().max(1024).optional(),
  })
  .meta({ title: "RegisterExecutor" });

export const RotateExecutorKeysSchema = z.strictObject({ nkeys: Nkeys }).meta({ title: "RotateExecutorKeys" });

/**
 * A registered executor: a NATS identity confined to its scope by the generated server config.
 * Only public keys are stored; a seed never reaches the gateway.
 */
export const ExecutorSchema = RegisterExecutorSchema.extend({
  created_at: z.iso.datetime(),
  updated_at: z.iso.datetime(),
}).meta({ title: "Executor" });

export type RegisterExecutor = z.infer<typeof RegisterExecutorSchema>;
export type Executor = z.infer<typeof ExecutorSchema>;
