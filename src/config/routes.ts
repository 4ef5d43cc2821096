import { z } from "zod";
import type { HttpErrorCode } from "../errors/catalogue.js";
import { ToolgateError } from "../errors/toolgate-error.js";
import { defineRoute, type RouteDef } from "../http/route.js";
import type { ConfigStore } from "./config-store.js";
import { AgentIdSchema, AgentVersionIdSchema, agentOfVersion, BindingIdSchema, SessionIdSchema, ToolsetIdSchema, ToolsetVersionIdSchema } from "./ids.js";
import {
  AgentVersionSchema,
  BindingSchema,
  CreateSessionSchema,
  PublishAgentVersionSchema,
  PublishToolsetVersionSchema,
  SessionSchema,
  ToolsetVersionSchema,
} from "./schemas.js";
import { checkToolsetTools } from "./toolset-checks.js";

export const BindingListSchema = z.object({ bindings: z.array(BindingSchema) });
export const ToolsetVersionListSchema = z.object({ versions: z.array(ToolsetVersionSchema) });
export const AgentVersionListSchema = z.object({ versions: z.array(AgentVersionSchema) });
export const SessionListSchema = z.object({ sessions: z.array(SessionSchema) });

const READ = ["configuration:read"] as const;
const WRITE = ["configuration:write"] as const;

function found<T>(value: T | null, code: HttpErrorCode, message: string): T {
  if (value === null) throw new ToolgateError(code, message);
  return value;
}

/** The configuration API (docs/protocol.md section 1): bindings, toolset versions, agent versions, sessions. */
export function configRoutes(store: ConfigStore): RouteDef[] {
  const bindingExists = async (id: string) => (await store.getBinding(id)) !== null;
  return [
    defineRoute({
      id: "createBinding",
      method: "POST",
      path: "/v1/bindings",
      summary: "Register an execution binding (executor scope, read or write tool); immutable",
      tags: ["configuration"],
      permissions: WRITE,
      errors: ["already_published"],
      body: BindingSchema,
      response: BindingSchema,
      status: 201,
      handler: ({ body }) => store.putBinding(body),
    }),
    defineRoute({
      id: "listBindings",
      method: "GET",
      path: "/v1/bindings",
      summary: "List registered bindings",
      tags: ["configuration"],
      permissions: READ,
      errors: [],
      response: BindingListSchema,
      handler: async () => ({ bindings: await store.listBindings() }),
    }),
    defineRoute({
      id: "getBinding",
      method: "GET",
      path: "/v1/bindings/{binding_id}",
      summary: "Read one binding",
      tags: ["configuration"],
      permissions: READ,
      errors: ["binding_not_found"],
      params: z.object({ binding_id: BindingIdSchema }),
      response: BindingSchema,
      handler: async ({ params }) => found(await store.getBinding(params.binding_id), "binding_not_found", `binding '${params.binding_id}' is not registered`),
    }),
    defineRoute({
      id: "publishToolsetVersion",
      method: "POST",
      path: "/v1/toolsets/{toolset}/versions",
      summary: "Publish an immutable toolset version (tool definitions with their result context budget)",
      tags: ["configuration"],
      permissions: WRITE,
      errors: ["already_published"],
      params: z.object({ toolset: ToolsetIdSchema }),
      body: PublishToolsetVersionSchema,
      check: (raw) => checkToolsetTools(raw, bindingExists),
      response: ToolsetVersionSchema,
      status: 201,
      handler: ({ params, body }) => store.publishToolsetVersion(params.toolset, body),
    }),
    defineRoute({
      id: "listToolsetVersions",
      method: "GET",
      path: "/v1/toolsets/{toolset}/versions",
      summary: "List the published versions of a toolset",
      tags: ["configuration"],
      permissions: READ,
      errors: [],
      params: z.object({ toolset: ToolsetIdSchema }),
      response: ToolsetVersionListSchema,
      handler: async ({ params }) => ({ versions: await store.listToolsetVersions(params.toolset) }),
    }),
    defineRoute({
      id: "getToolsetVersion",
      method: "GET",
      path: "/v1/toolsets/{toolset}/versions/{version}",
      summary: "Read one toolset version",
      tags: ["configuration"],
      permissions: READ,
      errors: ["toolset_version_not_found"],
      params: z.object({ toolset: ToolsetIdSchema, version: ToolsetVersionIdSchema }),
      response: ToolsetVersionSchema,
      handler: async ({ params }) =>
        found(
          await store.getToolsetVersion(params.toolset, params.version),
          "toolset_version_not_found",
          `toolset '${params.toolset}' has no published version '${params.version}'`,
        ),
    }),
    defineRoute({
      id: "publishAgentVersion",
      method: "POST",
      path: "/v1/agents/{agent}/versions",
      summary: "Publish an agent version pinning a toolset version and max_context_tokens; returns its fixed id",
      tags: ["configuration"],
      permissions: WRITE,
      errors: ["already_published"],
      params: z.object({ agent: AgentIdSchema }),
      body: PublishAgentVersionSchema,
      agentScope: ({ params }) => params.agent,
      response: AgentVersionSchema,
      status: 201,
      handler: ({ params, body }) => store.publishAgentVersion(params.agent, body),
    }),
    defineRoute({
      id: "listAgentVersions",
      method: "GET",
      path: "/v1/agents/{agent}/versions",
      summary: "List the published versions of an agent",
      tags: ["configuration"],
      permissions: READ,
      errors: [],
      params: z.object({ agent: AgentIdSchema }),
      agentScope: ({ params }) => params.agent,
      response: AgentVersionListSchema,
      handler: async ({ params }) => ({ versions: await store.listAgentVersions(params.agent) }),
    }),
    defineRoute({
      id: "getAgentVersion",
      method: "GET",
      path: "/v1/agent-versions/{agent_version}",
      summary: "Read one agent version by its fixed id",
      tags: ["configuration"],
      permissions: READ,
      errors: ["agent_version_not_found"],
      params: z.object({ agent_version: AgentVersionIdSchema }),
      agentScope: ({ params }) => agentOfVersion(params.agent_version),
      response: AgentVersionSchema,
      handler: async ({ params }) =>
        found(await store.getAgentVersion(params.agent_version), "agent_version_not_found", `agent version '${params.agent_version}' is not published`),
    }),
    defineRoute({
      id: "createSession",
      method: "POST",
      path: "/v1/sessions",
      summary: "Start a session pinned to one published agent version, for one end-user subject",
      tags: ["sessions"],
      permissions: ["runtime:write"],
      errors: [],
      body: CreateSessionSchema,
      agentScope: ({ body }) => agentOfVersion(body.agent_version),
      response: SessionSchema,
      status: 201,
      handler: ({ body }) => store.createSession(body),
    }),
    defineRoute({
      id: "listSessions",
      method: "GET",
      path: "/v1/sessions",
      summary: "List the sessions of one agent",
      tags: ["sessions"],
      permissions: ["runtime:read", "configuration:read"],
      errors: [],
      query: z.object({ agent: AgentIdSchema }),
      agentScope: ({ query }) => query.agent,
      response: SessionListSchema,
      handler: async ({ query }) => ({ sessions: (await store.listSessions()).filter((s) => s.agent === query.agent) }),
    }),
    defineRoute({
      id: "getSession",
      method: "GET",
      path: "/v1/sessions/{session_id}",
      summary: "Read one session",
      tags: ["sessions"],
      permissions: ["runtime:read", "configuration:read"],
      errors: ["session_not_found"],
      params: z.object({ session_id: SessionIdSchema }),
      agentScope: async ({ params }) => (await store.getSession(params.session_id))?.agent,
      response: SessionSchema,
      handler: async ({ params }) => found(await store.getSession(params.session_id), "session_not_found", `session '${params.session_id}' does not exist`),
    }),
  ];
}
