import { parseExactJson, toJsonText } from "../budget/index.js";
import { GatewayError } from "../client/errors.js";

/** Where the gateway's HTTP API is, and the API key to call it with. */
export interface GatewayTarget {
  baseUrl: string;
  apiKey: string;
}

/**
 * One JSON request to the gateway's HTTP API; resolves to the parsed body of a 2xx answer. Any other
 * answer throws `GatewayError` with the gateway's own status, code, message and details.
 */
export async function requestGateway(target: GatewayTarget, method: "GET" | "POST", path: string, body?: unknown): Promise<unknown> {
  const response = await fetch(new URL(path, target.baseUrl), {
    method,
    headers: { authorization: `Bearer ${target.apiKey}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: toJsonText(body) }), // exact numbers both ways
  });
  if (!response.ok) throw await GatewayError.fromResponse(response, `${method} ${path}`);
  return parseExactJson(await response.text());
}
