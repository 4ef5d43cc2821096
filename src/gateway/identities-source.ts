import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import type { Logger } from "../log/logger.js";
import { IdentitiesConfigSchema, PERMISSIONS, type IdentityConfig } from "../http/identities.js";
import { GatewayConfigError, type GatewayConfig } from "./config.js";

export const LOCAL_ADMIN_KEY_FILE = "admin.key";

function parseIdentities(text: string, source: string): IdentityConfig[] {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new GatewayConfigError(`${source} is not valid JSON: ${(err as Error).message}`);
  }
  const parsed = IdentitiesConfigSchema.safeParse(raw);
  if (!parsed.success)
    throw new GatewayConfigError(`${source} is invalid:\n${parsed.error.issues.map((i) => `  [${i.path.join(".")}] ${i.message}`).join("\n")}`);
  return parsed.data;
}

/**
 * The identities to serve: `TOOLGATE_IDENTITIES` (JSON), else `TOOLGATE_IDENTITIES_FILE`, else, so a
 * first local run works, a local admin key (all agents, all permissions) generated once into the data
 * dir with mode 0600. Only the key file's path is logged, never the key.
 */
export function resolveIdentities(config: GatewayConfig, logger: Logger): IdentityConfig[] {
  if (config.TOOLGATE_IDENTITIES) return parseIdentities(config.TOOLGATE_IDENTITIES, "TOOLGATE_IDENTITIES");
  if (config.TOOLGATE_IDENTITIES_FILE) {
    const path = resolve(config.TOOLGATE_IDENTITIES_FILE);
    if (!existsSync(path)) throw new GatewayConfigError(`TOOLGATE_IDENTITIES_FILE ${path} does not exist`);
    return parseIdentities(readFileSync(path, "utf8"), `identities file ${path}`);
  }
  const keyFile = resolve(join(config.TOOLGATE_DATA_DIR, LOCAL_ADMIN_KEY_FILE));
  if (!existsSync(keyFile)) {
    mkdirSync(config.TOOLGATE_DATA_DIR, { recursive: true });
    writeFileSync(keyFile, randomBytes(32).toString("base64url") + "\n", { mode: 0o600, flag: "wx" });
    chmodSync(keyFile, 0o600);
    logger.warn(
      { keyFile },
      "no identities configured: generated a local admin key (all agents, all permissions); use it as 'Authorization: Bearer <contents of the file>'",
    );
  } else {
    logger.info({ keyFile }, "no identities configured: using the local admin key file");
  }
  return [{ name: "local-admin", key: readFileSync(keyFile, "utf8").trim(), agents: "*", permissions: [...PERMISSIONS] }];
}
