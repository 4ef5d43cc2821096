/**
 * `toolgate/mcp`: an MCP server as a toolgate executor, beside the ToolRunner it is built on.
 * A separate entry so that `toolgate/runner` does not load the MCP SDK. See docs/mcp.md.
 */
export { McpExecutor, type McpExecutorOptions } from "./executor.js";
export { McpConnection, McpCallNotSent, McpConnectionLost, type McpConnectionOptions } from "./connection.js";
export { McpServerTarget } from "./server-target.js";
export { kindFromAnnotations, mapTools, ToolMappingError, ToolMappingOptions, type MappedTool, type ToolKind } from "./tool-mapping.js";
export { importedToolset, type ImportedToolset } from "./toolset.js";
export { publishToolset } from "./publish.js";
export type { GatewayTarget } from "../runner/gateway-request.js";
