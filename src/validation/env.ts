import type { z } from "zod";

/** What an operator needs to know about one environment variable; rendered into docs/operations.md. */
export interface EnvDoc {
  meaning: string;
  /** The values accepted, as a person would say it: printed with every error about the variable. */
  allowed: string;
  /** The default as documented, when it is not a literal of the schema (e.g. "the HTTP port"). */
  default?: string;
}

/** Attaches the variable's documentation to its schema (zod metadata), so errors and docs share it. */
export function envVar<S extends z.ZodType>(schema: S, doc: EnvDoc): S {
  return schema.meta({ ...doc }) as S;
}

function docOf(schema: z.ZodType): EnvDoc | undefined {
  const meta = schema.meta() as Partial<EnvDoc> | undefined;
  return meta?.meaning !== undefined && meta.allowed !== undefined ? (meta as EnvDoc) : undefined;
}

function defaultOf(schema: z.ZodType, doc: EnvDoc): string {
  if (doc.default !== undefined) return doc.default;
  const def = schema.def as { type: string; defaultValue?: unknown };
  return def.type === "default" ? `\`${String(def.defaultValue)}\`` : "unset";
}

/** Environment variables failed validation; the message names each one, its value and what is allowed. */
export class EnvError extends Error {
  override readonly name: string = "EnvError";
}

/**
 * Parses the variables of `shape` from `env` (empty counts as unset; others are ignored). Every bad
 * variable is reported at once: `NAME="value": problem (allowed: ...)`.
 */
export function parseEnv<T extends z.ZodObject>(
  schema: T,
  env: Record<string, string | undefined>,
  ErrorClass: new (message: string) => Error = EnvError,
  /** What is being configured, for the message's first line. */
  what = "environment",
): z.infer<T> {
  const relevant = Object.fromEntries(Object.keys(schema.shape).map((k) => [k, env[k] === "" ? undefined : env[k]]));
  const parsed = schema.safeParse(relevant);
  if (parsed.success) return parsed.data;
  const lines = parsed.error.issues.map((issue) => {
    const name = String(issue.path[0]);
    const field = schema.shape[name] as z.ZodType | undefined;
    // A cross-variable rule (custom issue) is not about the value's form: its message says it all.
    const allowed = issue.code !== "custom" && field ? docOf(field)?.allowed : undefined;
    const value = relevant[name] === undefined ? " (unset)" : `=${JSON.stringify(relevant[name])}`;
    return `  ${name}${value}: ${issue.message}${allowed ? ` (allowed: ${allowed})` : ""}`;
  });
  throw new ErrorClass(`invalid ${what}:\n${lines.join("\n")}\nFix the variable(s) above; every variable is listed in docs/operations.md.`);
}

/** The Markdown table of every variable of `shape`: docs/operations.md carries it, a test keeps them equal. */
export function renderEnvTable(shape: Record<string, z.ZodType>): string {
  const rows = Object.entries(shape).map(([name, schema]) => {
    const doc = docOf(schema);
    if (!doc) throw new Error(`environment variable ${name} has no documentation: declare it with envVar()`);
    return `| \`${name}\` | ${defaultOf(schema, doc)} | ${doc.meaning} | ${doc.allowed} |`;
  });
  return ["| variable | default | meaning | allowed |", "| --- | --- | --- | --- |", ...rows].join("\n");
}
