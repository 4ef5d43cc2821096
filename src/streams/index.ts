export * from "./definitions.js";
export { loadDefinitions, parseDefinitions, defaultStreamsDir, DefinitionsError } from "./load.js";
export { planStreams, type PlanEntry, type FieldChange, type ChangeEffect } from "./plan.js";
export { applyStreams, ensureStreams, describeEntry, StreamsRefusedError, type ApplyOptions, type ApplyResult } from "./apply.js";
export { declaredStreamNames, inspectStreams, type JetStreamSnapshot, type StreamSnapshot, type ConsumerSnapshot } from "./inspect.js";
