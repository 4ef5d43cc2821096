export {
  DEFAULT_RESULT_CONTEXT_BYTES,
  MAX_RESULT_CONTEXT_BYTES,
  MIN_RESULT_CONTEXT_BYTES,
  maxResultContextBytesSchema,
  preserveFieldsSchema,
  resultContextBudgetSchema,
  type ResultContextBudget,
} from "./budget.js";
export {
  CanonicalJsonError,
  MAX_NESTING_DEPTH,
  MAX_RESULT_DEPTH,
  canonicalJson,
  compactByteLength,
  encodeCanonicalJson,
  toJsonText,
  withCanonicalJson,
} from "./canonical-json.js";
export { buildContextPreview, contextPreviewSchema, previewWithReport, type ContextPreview, type ContextPreviewOptions } from "./context-preview.js";
export { JsonFloat, JsonNumberError, toPlainNumbers } from "./json-numbers.js";
export { jsonValueSchema, parseExactJson } from "./json-text.js";
export { PRESERVED_FIELDS_SHARE, PROJECTION_VERSION, resultKindSchema, type PreviewResult, type ResultKind } from "./projection.js";
export {
  CURSOR_KEYS,
  PRESERVED_PATH_MAX_SEGMENTS,
  STATE_KEYS,
  STATUS_KEYS,
  STATUS_KEY_SUFFIX,
  type PreservedValue,
  type UnpreservedPath,
} from "./preserved-fields.js";
