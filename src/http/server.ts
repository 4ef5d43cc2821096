import Fastify, { LogController, type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import { JsonNumberError, parseExactJson, toJsonText } from "../budget/index.js";
import type { Logger } from "../log/logger.js";
import { DEFAULT_MAX_JSON_DEPTH, jsonTextTooDeep } from "../validation/json-depth.js";
import { ToolgateError } from "../errors/toolgate-error.js";
import { ApiError, errorBody, httpStatus } from "./errors.js";

/** `4194304` -> `4 MiB`, else KiB or bytes: the body limit as a reader would write it. */
function byteSize(bytes: number): string {
  if (bytes % (1024 * 1024) === 0) return `${bytes / (1024 * 1024)} MiB`;
  return bytes % 1024 === 0 ? `${bytes / 1024} KiB` : `${bytes} bytes`;
}

/** Maps fastify's own request errors (body parsing, limits) to the project's error codes. */
function fromFastify(err: FastifyError, bodyLimit: number): ApiError | undefined {
  switch (err.code) {
    case "FST_ERR_CTP_INVALID_JSON_BODY":
    case "FST_ERR_CTP_EMPTY_JSON_BODY":
      return new ApiError("invalid_json", `the body is not valid JSON: ${err.message}`);
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return new ApiError(
        "payload_too_large",
        `the request body is larger than ${byteSize(bodyLimit)} (TOOLGATE_HTTP_BODY_LIMIT); page big data or send a reference`,
        [{ path: "body", code: "too_big", message: `at most ${bodyLimit} bytes`, allowed: `0..${bodyLimit} bytes` }],
      );
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
      return new ApiError("unsupported_media_type", "send the body as Content-Type: application/json");
  }
  if (err instanceof SyntaxError && err.statusCode === 400) return new ApiError("invalid_json", `the body is not valid JSON: ${err.message}`);
  return undefined;
}

export interface HttpAppOptions {
  logger: Logger;
  /** Largest accepted request body; fastify's default is 1 MiB. */
  bodyLimit?: number;
  /** Deepest accepted nesting of arrays/objects in a JSON body. */
  maxJsonDepth?: number;
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * JSON bodies are checked before they are parsed: strict UTF-8 (a lone surrogate or a stray byte is a
 * 400, not a silently replaced character) and bounded nesting (a 400, not a stack overflow further
 * down); then fastify's own parser, which also refuses `__proto__` and `constructor` poisoning, or, on a
 * route whose body carries a product's values (`exactNumbers`), the exact parser (a key `__proto__` stays
 * an ordinary member there, and every number is kept as written).
 */
function guardJsonBodies(app: FastifyInstance, maxDepth: number): void {
  const parse = app.getDefaultJsonParser("error", "error");
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "buffer" }, (request, body, done) => {
    // An empty body is no body: routes that take none accept it, routes that need one say it is required.
    if ((body as Buffer).length === 0) return done(null, undefined);
    let text: string;
    try {
      text = utf8.decode(body as Buffer);
    } catch {
      return done(new ApiError("invalid_utf8", "the body is not valid UTF-8: send JSON encoded as UTF-8"), undefined);
    }
    if (jsonTextTooDeep(text, maxDepth)) return done(new ApiError("json_too_deep", `the body nests arrays/objects deeper than ${maxDepth} levels`), undefined);
    if (!(request.routeOptions.config as { exactNumbers?: boolean }).exactNumbers) return parse(request, text, done);
    try {
      done(null, parseExactJson(text));
    } catch (err) {
      const reason = err instanceof SyntaxError || err instanceof JsonNumberError ? err.message : String(err);
      done(new ApiError("invalid_json", `the body is not valid JSON: ${reason}`), undefined);
    }
  });
}

/**
 * One access line per request, once answered, with what was asked and how it went (fastify's own writes
 * two: on arrival and on answer). A request that went well is logged at debug: at thousands of tool calls
 * a second a line each was a measurable share of the gateway's CPU, and `/metrics` counts them anyway
 * (`toolgate_http_request_duration_seconds_count`). Refusals (4xx) stay at info and failures at error.
 */
class AccessLog extends LogController {
  override incomingRequest(): void {}

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (this.isLogDisabled(request)) return;
    const level = error || reply.statusCode >= 500 ? "error" : reply.statusCode >= 400 ? "info" : "debug";
    const line = { req: { method: request.method, url: request.url }, res: { statusCode: reply.statusCode }, responseTime: reply.elapsedTime };
    if (error) reply.log.error({ ...line, err: error }, "request errored");
    else reply.log[level](line, "request completed");
  }
}

/** A fastify instance with pino logging and the structured error shape on every failure. */
export function createHttpApp(options: HttpAppOptions): FastifyInstance {
  const bodyLimit = options.bodyLimit ?? 4 * 1024 * 1024;
  const app = Fastify({ loggerInstance: options.logger, logController: new AccessLog(), bodyLimit }) as unknown as FastifyInstance;
  app.removeContentTypeParser("text/plain"); // JSON only: any other body is a 415
  // While closing, answer in-flight requests with `Connection: close`: otherwise a client's idle
  // keep-alive socket holds the shutdown until the keep-alive timeout.
  let closing = false;
  app.addHook("preClose", async () => {
    closing = true;
  });
  // Hooks on every request take a callback, not a promise: one microtask chain fewer per request.
  app.addHook("onSend", (_request, reply, payload, done) => {
    if (closing) reply.header("connection", "close");
    done(null, payload);
  });
  guardJsonBodies(app, options.maxJsonDepth ?? DEFAULT_MAX_JSON_DEPTH);
  // Canonical JSON out: exact numbers (bigint, 1.0) and a stored projection served in the bytes it was measured in.
  app.setReplySerializer((payload) => toJsonText(payload));
  app.setErrorHandler((err: FastifyError, request, reply) => {
    const refusal = err instanceof ToolgateError ? err : fromFastify(err, bodyLimit);
    if (refusal) {
      const status = httpStatus(refusal.code);
      // Each refusal is logged once, with its code and reason (the request line is logged by fastify).
      if (status >= 500) request.log.error({ err }, refusal.message);
      else request.log.info({ status, code: refusal.code }, `request refused: ${refusal.message}`);
      if (refusal instanceof ApiError && refusal.headers) reply.headers(refusal.headers);
      return reply.code(status).send(errorBody(refusal));
    }
    request.log.error({ err }, "unhandled error");
    return reply.code(httpStatus("internal")).send(errorBody(new ToolgateError("internal", "internal error; see the gateway log")));
  });
  app.setNotFoundHandler((request, reply) =>
    reply
      .code(httpStatus("route_not_found"))
      .send(errorBody(new ToolgateError("route_not_found", `no route ${request.method} ${request.url.split("?")[0]}; see /v1/openapi.json`))),
  );
  return app;
}
