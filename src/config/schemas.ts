import { z } from "zod";
import {
  AgentIdSchema,
  AgentVersionIdSchema,
  BindingIdSchema,
  ExecutorScopeSchema,
  SessionIdSchema,
  ToolNameSchema,
  ToolsetIdSchema,
  ToolsetVersionIdSchema,
} from "./ids.js";
import { preserveFieldsSchema, resultContextBudgetSchema } from "../budget/index.js";
import { ToolKind } from "../wire/primitives.js";

/**
 * The configuration objects (docs/protocol.md sections 1 and 5). Every object is immutable once stored.
 * Request bodies are the stored objects minus what the gateway assigns (ids from the path, timestamps).
 */

const Timestamp = z.iso.datetime().describe("RFC 3339 time, UTC");
/** A JSON Schema document; that it is a valid one is checked with ajv when a toolset is published. */
const JsonSchemaDocument = z.record(z.string(), z.unknown()).describe("JSON Schema (draft 2020-12)");

export const BindingSchema = z
  .strictObject({
    binding_id: BindingIdSchema,
    executor_scope: ExecutorScopeSchema,
    tool_kind: ToolKind.describe("read tools have no side effects; write tools go through grant/accepted"),
    retry_reads_safe: z.boolean().default(false).describe("A read tool may be re-executed after an unknown outcome"),
    description: z.string().max(1024).optional(),
  })
  .meta({ title: "Binding" });

export const ToolDefinitionSchema = z
  .strictObject({
    name: ToolNameSchema,
    description: z.string().min(1).max(4096),
    binding_id: BindingIdSchema,
    input_schema: JsonSchemaDocument,
    output_schema: JsonSchemaDocument,
    max_result_context_bytes: resultContextBudgetSchema.shape.max_result_context_bytes.describe(
      "Byte budget of the result's compact JSON (UTF-8) when it first enters execution history; default 16384",
    ),
    preserve_fields: preserveFieldsSchema.optional(),
    task_deadline_ms: z
      .number()
      .int()
      .min(1_000)
      .max(30 * 86_400_000)
      .optional()
      .describe(
        "How long a task this tool submits may run in the background before it needs reconciliation (1 s to 30 days); default one day (docs/async-tasks.md)",
      ),
  })
  .meta({ title: "ToolDefinition" });

export const PublishToolsetVersionSchema = z
  .strictObject({
    version: ToolsetVersionIdSchema,
    tools: z.array(ToolDefinitionSchema).min(1).max(256),
  })
  .meta({ title: "PublishToolsetVersion" });

export const ToolsetVersionSchema = z
  .strictObject({
    toolset: ToolsetIdSchema,
    version: ToolsetVersionIdSchema,
    tools: z.array(ToolDefinitionSchema),
    published_at: Timestamp,
  })
  .meta({ title: "ToolsetVersion" });

const MaxContextTokens = z.number().int().min(1).max(10_000_000).describe("Input window of the agent's model, in tokens");

export const PublishAgentVersionSchema = z
  .strictObject({
    toolset: ToolsetIdSchema,
    toolset_version: ToolsetVersionIdSchema,
    max_context_tokens: MaxContextTokens,
  })
  .meta({ title: "PublishAgentVersion" });

export const AgentVersionSchema = z
  .strictObject({
    agent: AgentIdSchema,
    agent_version: AgentVersionIdSchema,
    toolset: ToolsetIdSchema,
    toolset_version: ToolsetVersionIdSchema,
    max_context_tokens: MaxContextTokens,
    published_at: Timestamp,
  })
  .meta({ title: "AgentVersion" });

const Subject = z.string().min(1).max(256).describe("The end user the session's runs act for");

export const CreateSessionSchema = z
  .strictObject({
    agent_version: AgentVersionIdSchema,
    subject: Subject,
  })
  .meta({ title: "CreateSession" });

export const SessionSchema = z
  .strictObject({
    session_id: SessionIdSchema,
    agent: AgentIdSchema,
    agent_version: AgentVersionIdSchema,
    subject: Subject,
    created_at: Timestamp,
  })
  .meta({ title: "Session" });

export type Binding = z.infer<typeof BindingSchema>;
export type BindingInput = z.input<typeof BindingSchema>;
export type ToolDefinition = z.infer<typeof ToolDefinitionSchema>;
export type PublishToolsetVersion = z.infer<typeof PublishToolsetVersionSchema>;
export type ToolsetVersion = z.infer<typeof ToolsetVersionSchema>;
export type PublishAgentVersion = z.infer<typeof PublishAgentVersionSchema>;
export type AgentVersion = z.infer<typeof AgentVersionSchema>;
export type CreateSession = z.infer<typeof CreateSessionSchema>;
export type Session = z.infer<typeof SessionSchema>;

/** What the execution path needs to run one tool of a session (see ConfigStore.resolveTool). */
export interface ResolvedTool {
  session: Session;
  agentVersion: AgentVersion;
  toolsetVersion: ToolsetVersion;
  tool: ToolDefinition;
  binding: Binding;
}
