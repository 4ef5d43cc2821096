// eslint: typescript-eslint's recommended rules, and the import boundaries between the folders of src/
// (docs/architecture.md's module table says what each folder is; the zones below say what it may import).
import js from "@eslint/js";
import { defineConfig } from "eslint/config";
import { createTypeScriptImportResolver } from "eslint-import-resolver-typescript";
import importX from "eslint-plugin-import-x";
import tseslint from "typescript-eslint";

/** Everything in src/ but the listed folders or files: the zone of a folder that may import only those. */
const allBut = (...allowed) => ({ from: "src", except: allowed });

/** One zone per rule: `target` may not import `from` (less `except`), and `message` says why. */
const boundaries = [
  {
    target: "src/errors",
    ...allBut("errors"),
    message: "src/errors/ imports nothing of the project: domain code and HTTP both use the catalogue, so it cannot depend on either.",
  },
  {
    target: "src/wire",
    ...allBut("wire", "errors", "budget", "validation"),
    message: "src/wire/ is the protocol gateway and executors share: it imports no gateway code, only the error catalogue and the JSON rules.",
  },
  {
    target: "src/kv",
    ...allBut("kv", "nats", "streams", "validation", "wire"),
    message: "src/kv/ is the plumbing under execution, context and checker: importing any of them back would be a cycle.",
  },
  {
    target: "src/http",
    ...allBut("http", "errors", "budget", "log", "validation", "config/ids.ts"),
    message: "src/http/ is the generic server every domain declares its routes with: it imports no domain (only the agent id's schema).",
  },
  {
    target: "src/execution/model",
    from: "src/execution",
    except: ["model"],
    message: "src/execution/model/ (records, state tables, ids) is what every execution room shares: it imports no other room.",
  },
  {
    target: [
      "src/execution/execution.ts",
      ...["model", "runs", "dispatch", "claims", "receipts", "operations", "tasks", "events", "transport"].map((room) => `src/execution/${room}`),
    ],
    from: "src/http",
    message: "the execution rooms are transport-neutral (HTTP, MCP and NATS use the same services): only src/execution/http/ speaks HTTP.",
  },
  {
    target: "src/context",
    from: "src/execution",
    except: ["model", "execution.ts"],
    message:
      "src/context/ reads runs through the execution facade it is handed and the records of src/execution/model/; its KV plumbing comes from src/kv/, never from an execution room.",
  },
  {
    target: "src/checker",
    from: "src/execution",
    except: ["model", "claims/claim-token.ts", "receipts/receipt-index.ts"],
    message:
      "src/checker/ judges the stored records (src/execution/model/) by the gateway's own definitions of a claim proof and an applied receipt; its KV plumbing comes from src/kv/, never from an execution room.",
  },
  {
    target: "src/runner",
    ...allBut("runner", "wire", "errors", "budget", "nats", "streams", "log", "client/errors.ts", "dryrun/schemas.ts"),
    message: "src/runner/ is the executor SDK a product embeds: the protocol, the NATS connection and GatewayError, never gateway internals.",
  },
  {
    target: "src/mcp-executor",
    ...allBut("mcp-executor", "runner", "client", "budget", "config/schemas.ts", "config/ids.ts"),
    message:
      "src/mcp-executor/ is an SDK a product embeds: the ToolRunner, the client and the configuration's schemas (a published toolset), never gateway internals.",
  },
  {
    target: "src/client",
    ...allBut(
      "client",
      "errors",
      "budget",
      // The routes' own declarations and schemas: the client speaks exactly the API the gateway serves.
      "config/schemas.ts",
      "config/ids.ts",
      "config/routes.ts",
      "context/window.ts",
      "context/usage-report.ts",
      "dryrun/schemas.ts",
      "execution/http",
      "execution/model",
      "http/errors.ts",
    ),
    message: "src/client/ is the agent-side SDK: it imports the routes' declarations and schemas, never a store, a service or the server.",
  },
  {
    target: "src/!(cli|gateway)/**",
    from: ["src/gateway/**", "src/cli/**"],
    message: "src/gateway/ composes the service and src/cli/ starts it: nothing they compose may depend back on them.",
  },
];

/** TypeScript files the compiler sees (tsconfig.json): the type-aware rules read its program. */
const TYPED = ["src/**/*.ts", "test/**/*.ts", "bench/**/*.ts", "examples/**/*.ts", "vitest.config.ts"];

export default defineConfig(
  {
    ignores: ["dist/", "dist-examples/", "node_modules/", ".tools/", ".toolgate/", "coverage/", "test-artifacts/", "bench/results/"],
  },
  js.configs.recommended,
  tseslint.configs.recommended,
  {
    // A disable comment that no longer silences anything is itself an error: each one stays explained and needed.
    linterOptions: { reportUnusedDisableDirectives: "error" },
    rules: {
      // `_name` says "left out on purpose": the fields a destructuring drops from the rest it keeps.
      "@typescript-eslint/no-unused-vars": ["error", { varsIgnorePattern: "^_" }],
    },
  },
  {
    // Of the type-checked rules, the promise ones: a forgotten await is a lost write or an unhandled
    // rejection. The rest of recommendedTypeChecked is left out: its no-unsafe-* family flags every
    // JSON body a test reads, and the remainder flagged conventions or style, not faults (rejecting with
    // an AbortSignal's reason, async methods of a promise-returning interface that need no await, casts
    // the compiler finds redundant).
    files: TYPED,
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-misused-promises": "error",
      "@typescript-eslint/await-thenable": "error",
    },
  },
  {
    // A test or a benchmark reads replies and bodies as `any` where the expectation that follows is the check.
    files: ["test/**/*.ts", "bench/**/*.ts"],
    rules: { "@typescript-eslint/no-explicit-any": "off" },
  },
  {
    files: ["src/**/*.ts"],
    plugins: { "import-x": importX },
    settings: { "import-x/resolver-next": [createTypeScriptImportResolver({ project: "tsconfig.json" })] },
    rules: {
      // A relative import the resolver cannot follow would pass every boundary unseen: each one must resolve.
      "import-x/no-unresolved": ["error", { ignore: ["^[^.]"] }],
      "import-x/no-restricted-paths": ["error", { zones: boundaries }],
      // The HTTP error class is the HTTP layer's own: domain code throws ToolgateError with a code. The package
      // root re-exports it for routes added with defineRoute (src/index.ts, below).
      "no-restricted-imports": [
        "error",
        { patterns: [{ regex: "/http/errors\\.js$", importNames: ["ApiError"], message: "throw ToolgateError with a code; src/http/ maps it to a status." }] },
      ],
    },
  },
  {
    files: ["src/http/**", "src/index.ts"],
    rules: { "no-restricted-imports": "off" },
  },
  {
    // Plain JavaScript: the launcher runs under Node, the console's script in the browser.
    files: ["bin/**/*.js"],
    languageOptions: { globals: { process: "readonly" } },
  },
  {
    files: ["src/console/assets/**/*.js"],
    languageOptions: {
      globals: Object.fromEntries(["window", "document", "location", "sessionStorage", "fetch", "URL", "Node"].map((name) => [name, "readonly"])),
    },
  },
);
