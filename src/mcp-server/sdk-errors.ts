import { McpError } from "@modelcontextprotocol/sdk/types.js";
import { ProtocolError } from "@modelcontextprotocol/server";
import { McpFault } from "./session-tools.js";

/** Runs `work`, rethrowing a protocol fault as the 1.x SDK's error class (2025-11-25). */
export async function faultsAsMcpErrors<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    throw err instanceof McpFault ? new McpError(err.code, err.message) : err;
  }
}

/** Runs `work`, rethrowing a protocol fault as the 2.x SDK's error class (2026-07-28). */
export async function faultsAsProtocolErrors<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    throw err instanceof McpFault ? new ProtocolError(err.code, err.message) : err;
  }
}
