/**
 * `toolgate`: the gateway as a library. Create it, `listen()` to start serving, `close()` to stop;
 * add routes with `defineRoute`, which share auth, validation, the error shape and OpenAPI.
 * `HTTP_ERRORS` is the catalogue of every error code with its status and meaning; a route throws
 * `ToolgateError` with one of its codes and the gateway answers with the code's status.
 * The executor SDK is `toolgate/runner`, the agent-side SDK `toolgate/client`.
 */
export { createGateway, type Gateway, type GatewayContext, type GatewayOptions } from "./gateway/gateway.js";
export { gatewayConfigFromEnv, type GatewayConfig } from "./gateway/config.js";
export { defineRoute, type RouteDef, type RouteRequest } from "./http/route.js";
export { HTTP_ERRORS, type HttpErrorCode } from "./errors/catalogue.js";
export { ErrorDetailSchema, ToolgateError, type ErrorDetail } from "./errors/toolgate-error.js";
export { ApiError, ErrorBodySchema, type ErrorBody } from "./http/errors.js";
