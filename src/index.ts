/**
 * `toolgate`: the gateway as a library. Create it, `listen()` to start serving, `close()` to stop;
 * add routes with `defineRoute`, which share auth, validation, the error shape and OpenAPI.
 * `HTTP_ERRORS` is the catalogue of every error code with its status and meaning.
 * The executor SDK is `toolgate/runner`, the agent-side SDK `toolgate/client`.
 */
export { createGateway, type Gateway, type GatewayContext, type GatewayOptions } from "./gateway/gateway.js";
export { gatewayConfigFromEnv, type GatewayConfig } from "./gateway/config.js";
export { defineRoute, type RouteDef, type RouteRequest } from "./http/route.js";
export { HTTP_ERRORS, type HttpErrorCode } from "./http/error-catalogue.js";
export { ApiError, ErrorBodySchema, ErrorDetailSchema, type ErrorBody, type ErrorDetail } from "./http/errors.js";
