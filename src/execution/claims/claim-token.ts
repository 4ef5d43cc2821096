import { hash, timingSafeEqual } from "node:crypto";
import { randomBase64url } from "../model/random-text.js";

/**
 * Claim tokens: 32 random bytes, base64url (43 characters). The gateway keeps only the sha256, so
 * neither a KV reader nor a log line can ever reconstruct a token. The bytes come from the CSPRNG page
 * the ids are drawn from (`randomBase64url`): `randomBytes(32)` per claim cost 5 µs, a slice 0.2 µs.
 */
export function newClaimToken(): { token: string; sha256: string } {
  const token = randomBase64url(32);
  return { token, sha256: claimTokenSha256(token) };
}

export function claimTokenSha256(token: string): string {
  return hash("sha256", token, "hex");
}

/** Constant-time comparison of a presented token against a stored sha256 (hex). */
export function claimTokenMatches(presented: string, storedSha256: string): boolean {
  return claimTokenMatcher(presented)(storedSha256);
}

/** `claimTokenMatches` for one presented token against any number of stored hashes: the token is hashed once. */
export function claimTokenMatcher(presented: string): (storedSha256: string) => boolean {
  const a = Buffer.from(claimTokenSha256(presented), "hex");
  return (storedSha256) => {
    const b = Buffer.from(storedSha256, "hex");
    return a.length === b.length && timingSafeEqual(a, b);
  };
}
