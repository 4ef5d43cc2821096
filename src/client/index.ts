/**
 * `toolgate/client`: the agent-side SDK over the gateway's HTTP API. See docs/client.md.
 */
export { ToolCall, ToolgateClient, type Assignment, type Run, type TaskResult, type ToolCallRequest, type ToolgateClientOptions } from "./client.js";
export { ModelTools, type AnthropicTool, type OpenAITool } from "./model-tools.js";
export { GatewayError, type GatewayErrorCode } from "./errors.js";
export type { HttpErrorCode } from "../errors/catalogue.js";
export { operations, type OperationId, type RequestBody, type ResponseBody } from "./operations.js";
export type { RunEventWithId } from "./event-source.js";
export { DEFAULT_RETRY, type CallOptions, type RetryPolicy } from "./transport.js";
