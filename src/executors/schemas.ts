import { nkeys } from "@nats-io/transport-node";
import { z } from "zod";
import { BindingIdSchema, ExecutorScopeSchema } from "../config/ids.js";
import { Id } from "../wire/primitives.js";

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

const distinct = (items: string[]) => new Set(items).size === items.length;

/** One or two keys: two while a rotation is under way (old and new both accepted until the old is removed). */
const NkeyList = z.array(UserNkeySchema).max(2).refine(distinct, "the same nkey is listed twice");
const Nkeys = NkeyList.min(1).describe("Public nkeys this executor may connect with: one, or two during a rotation");

/**
 * None registers an executor without a NATS identity: it can connect only to a server without the
 * generated authorization (local development), and no request of it is checked for an nkey.
 */
const RegisteredNkeys = NkeyList.default([]).describe(
  "Public nkeys this executor may connect with: one, or two during a rotation; none for a server without the generated authorization (local development)",
);

const Bindings = z.array(BindingIdSchema).max(1024).refine(distinct, "the same binding is listed twice");

export const ExecutorIdSchema = Id.describe("Executor id, unique across scopes (a NATS subject token)");

export const RegisterExecutorSchema = z
  .strictObject({
    executor_id: ExecutorIdSchema,
    scope: ExecutorScopeSchema,
    nkeys: RegisteredNkeys,
    bindings: Bindings.optional().describe("Bindings it may claim; each must be registered in its scope"),
    description: z.string().max(1024).optional(),
  })
  .meta({ title: "RegisterExecutor" });

export const RotateExecutorKeysSchema = z.strictObject({ nkeys: Nkeys }).meta({ title: "RotateExecutorKeys" });

export const SetExecutorBindingsSchema = z
  .strictObject({ bindings: Bindings.describe("Every binding it may claim from now on; each must be registered in its scope") })
  .meta({ title: "SetExecutorBindings" });

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
