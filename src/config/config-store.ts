import { randomUUID } from "node:crypto";
import type { NatsConnection } from "@nats-io/transport-node";
import { Kvm, type KV } from "@nats-io/kv";
import type { z } from "zod";
import { ToolgateError } from "../errors/toolgate-error.js";
import { isRevisionConflict } from "../nats/jetstream-codes.js";
import { agentOfVersion, agentVersionId, agentVersionNumber } from "./ids.js";
import { configKeys } from "./keys.js";
import {
  AgentVersionSchema,
  BindingSchema,
  SessionSchema,
  ToolsetVersionSchema,
  type AgentVersion,
  type Binding,
  type BindingInput,
  type CreateSession,
  type PublishAgentVersion,
  type PublishToolsetVersion,
  type ResolvedTool,
  type Session,
  type ToolsetVersion,
} from "./schemas.js";
import { checkToolsetTools } from "./toolset-checks.js";
import { CONFIG_BUCKET } from "../streams/names.js";

/** True for the error `kv.create` raises when the key already exists. */
export function isKeyExists(err: unknown): boolean {
  return isRevisionConflict(err);
}

const encoder = new TextEncoder();

/**
 * The configuration plane's storage: the JetStream KV bucket `tg_config` (declared in `streams/`),
 * JSON values so operators can read them with `nats kv get`. Every object is written once with
 * `kv.create`: publishing the same id again is refused with `already_published`, never an overwrite.
 * Values are validated with zod on read. Because nothing is ever changed, reads are cached forever.
 */
export class ConfigStore {
  private readonly cache = new Map<string, unknown>();

  private constructor(readonly kv: KV) {}

  /** Opens the bucket; it must exist (`toolgate streams apply`, or the gateway at start, makes it). */
  static async open(nc: NatsConnection): Promise<ConfigStore> {
    return new ConfigStore(await new Kvm(nc).open(CONFIG_BUCKET));
  }

  // ---- bindings

  async putBinding(input: BindingInput): Promise<Binding> {
    const binding = BindingSchema.parse(input);
    await this.create(
      configKeys.binding(binding.binding_id),
      binding,
      `binding '${binding.binding_id}' is already registered; bindings are immutable: register a new binding_id`,
    );
    return binding;
  }

  getBinding(bindingId: string): Promise<Binding | null> {
    return this.read(configKeys.binding(bindingId), BindingSchema);
  }

  listBindings(): Promise<Binding[]> {
    return this.list(configKeys.bindings(), BindingSchema);
  }

  // ---- toolset versions

  /** Publishes a version whose request already passed its schema; re-checks bindings and JSON Schemas. */
  async publishToolsetVersion(toolset: string, input: PublishToolsetVersion, now = new Date()): Promise<ToolsetVersion> {
    const details = await checkToolsetTools(input, async (id) => (await this.getBinding(id)) !== null);
    if (details.length > 0) throw ToolgateError.validation(details);
    const value = ToolsetVersionSchema.parse({ toolset, version: input.version, tools: input.tools, published_at: now.toISOString() });
    await this.create(
      configKeys.toolsetVersion(toolset, value.version),
      value,
      `toolset '${toolset}' version '${value.version}' is already published and immutable: publish a new version`,
    );
    return value;
  }

  getToolsetVersion(toolset: string, version: string): Promise<ToolsetVersion | null> {
    return this.read(configKeys.toolsetVersion(toolset, version), ToolsetVersionSchema);
  }

  listToolsetVersions(toolset: string): Promise<ToolsetVersion[]> {
    return this.list(configKeys.toolsetVersions(toolset), ToolsetVersionSchema);
  }

  // ---- agent versions

  /**
   * Pins a published toolset version under the next free id `<agent>.<n>`. Two publishers racing for
   * the same n are separated by `kv.create`: the loser takes the next number.
   */
  async publishAgentVersion(agent: string, input: PublishAgentVersion, now = new Date()): Promise<AgentVersion> {
    if ((await this.getToolsetVersion(input.toolset, input.toolset_version)) === null)
      throw ToolgateError.validation([
        {
          path: "toolset_version",
          code: "unknown_toolset_version",
          message: `toolset '${input.toolset}' has no published version '${input.toolset_version}': publish it first`,
        },
      ]);
    for (;;) {
      const taken = (await this.keys(configKeys.agentVersions(agent))).map((k) => agentVersionNumber(k));
      const id = agentVersionId(agent, Math.max(0, ...taken) + 1);
      const value = AgentVersionSchema.parse({ agent, agent_version: id, ...input, published_at: now.toISOString() });
      try {
        await this.kv.create(configKeys.agentVersion(id), encoder.encode(JSON.stringify(value)));
        this.cache.set(configKeys.agentVersion(id), value);
        return value;
      } catch (err) {
        if (!isKeyExists(err)) throw err;
      }
    }
  }

  getAgentVersion(agentVersion: string): Promise<AgentVersion | null> {
    return this.read(configKeys.agentVersion(agentVersion), AgentVersionSchema);
  }

  async listAgentVersions(agent: string): Promise<AgentVersion[]> {
    const versions = await this.list(configKeys.agentVersions(agent), AgentVersionSchema);
    return versions.sort((a, b) => agentVersionNumber(a.agent_version) - agentVersionNumber(b.agent_version));
  }

  // ---- sessions

  async createSession(input: CreateSession, now = new Date()): Promise<Session> {
    if ((await this.getAgentVersion(input.agent_version)) === null)
      throw ToolgateError.validation([
        {
          path: "agent_version",
          code: "unknown_agent_version",
          message: `agent version '${input.agent_version}' is not published: publish it with POST /v1/agents/{agent}/versions`,
        },
      ]);
    const value = SessionSchema.parse({ session_id: randomUUID(), agent: agentOfVersion(input.agent_version), ...input, created_at: now.toISOString() });
    await this.create(configKeys.session(value.session_id), value, "session id collision; retry");
    return value;
  }

  getSession(sessionId: string): Promise<Session | null> {
    return this.read(configKeys.session(sessionId), SessionSchema);
  }

  listSessions(): Promise<Session[]> {
    return this.list(configKeys.sessions(), SessionSchema);
  }

  // ---- execution path

  /** Everything a tool call in a session needs, or a `*_not_found` error naming the missing link. */
  async resolveTool(sessionId: string, toolName: string): Promise<ResolvedTool> {
    const session = await this.getSession(sessionId);
    if (!session) throw new ToolgateError("session_not_found", `session '${sessionId}' does not exist: create one with POST /v1/sessions`);
    const { agentVersion, toolsetVersion, tool } = await this.resolveAgentTool(session.agent_version, toolName);
    const binding = await this.getBinding(tool.binding_id);
    if (!binding) throw new ToolgateError("binding_missing", `binding '${tool.binding_id}' of tool '${toolName}' is missing from the store`);
    return { session, agentVersion, toolsetVersion, tool, binding };
  }

  /** The tool as pinned by an agent version (the dry-run's view, no session needed). */
  async resolveAgentTool(agentVersionIdValue: string, toolName: string): Promise<Omit<ResolvedTool, "session" | "binding">> {
    const agentVersion = await this.getAgentVersion(agentVersionIdValue);
    if (!agentVersion) throw new ToolgateError("agent_version_not_found", `agent version '${agentVersionIdValue}' is not published`);
    const toolsetVersion = await this.getToolsetVersion(agentVersion.toolset, agentVersion.toolset_version);
    if (!toolsetVersion)
      throw new ToolgateError(
        "toolset_version_missing",
        `toolset version ${agentVersion.toolset}/${agentVersion.toolset_version} pinned by '${agentVersion.agent_version}' is missing from the store`,
      );
    const tool = toolsetVersion.tools.find((t) => t.name === toolName);
    if (!tool)
      throw new ToolgateError(
        "tool_not_found",
        `tool '${toolName}' is not in toolset ${toolsetVersion.toolset} version ${toolsetVersion.version} pinned by agent version '${agentVersion.agent_version}'; its tools: ${toolsetVersion.tools.map((t) => t.name).join(", ")}`,
      );
    return { agentVersion, toolsetVersion, tool };
  }

  // ---- migration

  /**
   * Stores an already-identified object under `key` unless that key holds it already: `created`,
   * `unchanged` (same value: migration ran before), or `differs` (left alone; objects are immutable).
   */
  async importValue<T>(key: string, schema: z.ZodType<T>, value: T): Promise<"created" | "unchanged" | "differs"> {
    const existing = await this.kv.get(key);
    if (existing && existing.operation === "PUT") return JSON.stringify(schema.parse(existing.json())) === JSON.stringify(value) ? "unchanged" : "differs";
    try {
      await this.kv.create(key, encoder.encode(JSON.stringify(value)));
    } catch (err) {
      if (isKeyExists(err)) return "differs";
      throw err;
    }
    return "created";
  }

  // ---- storage primitives

  private async create(key: string, value: unknown, conflictMessage: string): Promise<void> {
    try {
      await this.kv.create(key, encoder.encode(JSON.stringify(value)));
    } catch (err) {
      if (isKeyExists(err)) throw new ToolgateError("already_published", conflictMessage);
      throw err;
    }
    this.cache.set(key, value);
  }

  private async read<T>(key: string, schema: z.ZodType<T>): Promise<T | null> {
    if (this.cache.has(key)) return this.cache.get(key) as T;
    const entry = await this.kv.get(key);
    if (!entry || entry.operation !== "PUT") return null;
    const value = schema.parse(entry.json());
    this.cache.set(key, value);
    return value;
  }

  /** Keys matching a filter (`toolsets.x.*`), sorted. */
  async keys(filter: string): Promise<string[]> {
    const out: string[] = [];
    for await (const key of await this.kv.keys(filter)) out.push(key);
    return out.sort();
  }

  private async list<T>(filter: string, schema: z.ZodType<T>): Promise<T[]> {
    const values = await Promise.all((await this.keys(filter)).map((k) => this.read(k, schema)));
    return values.filter((v): v is Awaited<T> => v !== null) as T[];
  }
}
