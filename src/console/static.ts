import { readFileSync } from "node:fs";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { STATUS_KEYS, STATUS_KEY_SUFFIX } from "../budget/index.js";
import { MIN_CALIBRATION_REPORTS } from "../context/estimator.js";

/**
 * The operator console (docs/console.md): a static page under `/console/` that talks to the API
 * with the key the operator types in. The files themselves are public: they hold no data, and every
 * API call the page makes carries the operator's bearer key.
 *
 * The assets sit beside this module (`src/console/assets/`; `npm run build` copies them to
 * `dist/console/assets/`), so the same URL resolves under tsx and from the compiled package.
 */
const ASSETS_DIR = new URL("./assets/", import.meta.url);

/** Only these files are served: no path from the request ever reaches the file system. */
const ASSETS: Record<string, string> = {
  "index.html": "text/html; charset=utf-8",
  "console.css": "text/css; charset=utf-8",
  "console.js": "text/javascript; charset=utf-8",
};

/** Strict: the page runs only its own script and talks only to its own origin. */
const SECURITY_HEADERS = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  // Small files, and a new gateway version must never run an old script against a new API.
  "cache-control": "no-cache",
};

/** What the page needs to know of the budget engine and the estimator, so it says what they do. */
function consoleSettings(): string {
  return JSON.stringify({ status_keys: [...STATUS_KEYS], status_key_suffix: STATUS_KEY_SUFFIX, min_calibration_reports: MIN_CALIBRATION_REPORTS });
}

/** Registers `GET /console`, `/console/` and its assets. Reads the files once: a missing asset fails at start. */
export function registerConsole(app: FastifyInstance): void {
  const files = new Map(Object.entries(ASSETS).map(([name, type]) => [name, { type, body: readFileSync(new URL(name, ASSETS_DIR)) }]));
  files.set("settings.json", { type: "application/json; charset=utf-8", body: Buffer.from(consoleSettings()) });

  // Relative, so it is also right behind a reverse proxy's path prefix; the page's own links are relative too.
  app.get("/console", (_request, reply) => reply.redirect("console/", 308));
  const serve = (request: FastifyRequest<{ Params: { file?: string } }>, reply: FastifyReply) => {
    const file = files.get(request.params.file ?? "index.html");
    if (!file) return reply.callNotFound();
    return reply.headers(SECURITY_HEADERS).type(file.type).send(file.body);
  };
  app.get("/console/", serve);
  app.get("/console/:file", serve);
}
