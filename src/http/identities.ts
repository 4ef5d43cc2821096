import { hash, timingSafeEqual } from "node:crypto";
import { z } from "zod";
import { AgentIdSchema } from "../config/ids.js";

export const PERMISSIONS = ["configuration:read", "configuration:write", "runtime:read", "runtime:write", "tools:execute"] as const;
export const PermissionSchema = z.enum(PERMISSIONS);
export type Permission = z.infer<typeof PermissionSchema>;

const Sha256Hex = z.string().regex(/^[0-9a-f]{64}$/, "key_sha256 is the lowercase hex sha256 of the key (64 characters)");

/** One API identity as configured (file `TOOLGATE_IDENTITIES_FILE` or env `TOOLGATE_IDENTITIES`). */
export const IdentityConfigSchema = z
  .strictObject({
    name: z.string().min(1).max(128),
    key: z.string().min(16, "a key has at least 16 characters").optional(),
    key_sha256: Sha256Hex.optional(),
    agents: z.union([z.literal("*"), z.array(AgentIdSchema)]).describe('Agent scope: a list of agent ids, or "*" for all'),
    permissions: z.array(PermissionSchema).min(1),
  })
  .refine((i) => (i.key === undefined) !== (i.key_sha256 === undefined), { message: "give exactly one of key or key_sha256", path: ["key"] });

export const IdentitiesConfigSchema = z.array(IdentityConfigSchema);
export type IdentityConfig = z.infer<typeof IdentityConfigSchema>;

/** An authenticated caller. */
export interface Identity {
  readonly name: string;
  readonly permissions: ReadonlySet<Permission>;
  /** Whether the identity's agent scope includes `agent`. */
  inScope(agent: string): boolean;
}

function sha256(text: string): Buffer {
  return hash("sha256", text, "buffer"); // one-shot: no Hash object per request
}

/**
 * Authenticates bearer keys. Only sha256 digests are kept; a presented key is hashed and compared
 * with every identity's digest in constant time (equal-length digests, `timingSafeEqual`, no early exit).
 */
export class IdentityRegistry {
  private readonly entries: { digest: Buffer; identity: Identity }[];

  constructor(configs: IdentityConfig[]) {
    const names = new Set<string>();
    this.entries = configs.map((c) => {
      if (names.has(c.name)) throw new Error(`identity name '${c.name}' is configured twice`);
      names.add(c.name);
      const scope = c.agents === "*" ? null : new Set(c.agents);
      return {
        digest: c.key !== undefined ? sha256(c.key) : Buffer.from(c.key_sha256 ?? "", "hex"),
        identity: { name: c.name, permissions: new Set(c.permissions), inScope: (agent) => scope === null || scope.has(agent) },
      };
    });
  }

  get size(): number {
    return this.entries.length;
  }

  /** The identity of an `Authorization: Bearer <key>` header, or null. */
  authenticate(authorization: string | undefined): Identity | null {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? "");
    if (!match?.[1]) return null;
    const presented = sha256(match[1]);
    let found: Identity | null = null;
    for (const entry of this.entries) if (timingSafeEqual(entry.digest, presented) && found === null) found = entry.identity;
    return found;
  }
}
