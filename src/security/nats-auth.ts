import { createHash } from "node:crypto";
import type { Executor } from "../executors/schemas.js";
import { EXECUTOR_JS_API_PREFIX, executorInboxPrefix, subjects } from "../wire/subjects.js";
import { candidateConsumer, STREAMS } from "../streams/names.js";

/**
 * The NATS server's authorization, generated from the executor registry (`toolgate nats-config`).
 *
 * Two accounts, because permissions alone cannot confine a client on nats-server 2.9: JetStream
 * answers an API request (and the gateway answers a claim) on whatever reply subject the requester
 * chose, so a user allowed only `$JS.API.CONSUMER.INFO.…` could set its reply to `$KV.<bucket>.<key>`
 * and have the server overwrite a KV entry (seen on 2.9.10; test/security/nats-auth.test.ts proves the
 * layout below stops it). Executors therefore live in their own account without JetStream; the gateway's account exports exactly the
 * protocol subjects, and a reply crossing the account boundary is routed back into the executors'
 * account, where no stream or bucket exists.
 */
export const GATEWAY_ACCOUNT = "TOOLGATE";
export const EXECUTORS_ACCOUNT = "EXECUTORS";

export interface SubjectPermissions {
  publish: string[];
  subscribe: string[];
}

interface Export {
  kind: "service" | "stream";
  subject: string;
  /** A pull request is answered by a batch of messages, not one. */
  responseType?: "stream";
  /** The subject in the executors' account, when it differs (the JetStream API under its prefix). */
  importAs?: string;
  /**
   * `share: true`: nats-server states the requester's account and nkey to the gateway (header
   * `Nats-Request-Info`, replacing any copy the client sent); the registry's nkey check reads it.
   * Only where that check runs: the header costs some 300 bytes a message.
   */
  share?: true;
}

const candidates = STREAMS.candidates;
const JS_API = "$JS.API";
const jsApi = (prefix: string, op: "INFO" | "MSG.NEXT", consumer: string) => `${prefix}.CONSUMER.${op}.${candidates}.${consumer}`;

/** nats-server's 8-character hash of an account name (sha-256, each of the first 8 bytes as a base-62 digit). */
function accountHash(account: string): string {
  const DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  return Array.from(createHash("sha256").update(account).digest().subarray(0, 8), (b) => DIGITS[b % DIGITS.length]).join("");
}

/**
 * The subjects an acknowledgement of a candidate is published on (`consumer` "*" for any): the
 * classic `$JS.ACK.<stream>.<consumer>.…`, and the format nats-server 2.14+ can switch to
 * (feature flag `js_ack_fc_v2`, to become the default): `$JS.ACK.<domain>.<account hash>.<stream>.<consumer>.…`,
 * the domain "_" unless the server sets one. Both are allowed, so an upgrade or the flag breaks nothing.
 */
export function candidateAckSubjects(consumer: string): string[] {
  return [`$JS.ACK.${candidates}.${consumer}.>`, `$JS.ACK.*.${accountHash(GATEWAY_ACCOUNT)}.${candidates}.${consumer}.>`];
}

/** What the gateway's account offers the executors' account; every executor's allow list is inside it. */
export const EXECUTOR_EXPORTS: readonly Export[] = [
  { kind: "service", subject: subjects.claim("*", "*"), share: true },
  { kind: "service", subject: subjects.presence("*", "*"), share: true },
  { kind: "service", subject: subjects.heldClaims("*", "*"), share: true },
  { kind: "service", subject: subjects.receiptQuery("*", "*") },
  { kind: "service", subject: subjects.controlQuery("*", "*") },
  { kind: "service", subject: subjects.receipt("*", "*", "*") },
  { kind: "service", subject: jsApi(JS_API, "INFO", "*"), importAs: jsApi(EXECUTOR_JS_API_PREFIX, "INFO", "*") },
  { kind: "service", subject: jsApi(JS_API, "MSG.NEXT", "*"), importAs: jsApi(EXECUTOR_JS_API_PREFIX, "MSG.NEXT", "*"), responseType: "stream" },
  ...candidateAckSubjects("*").map((subject): Export => ({ kind: "service", subject })),
  { kind: "stream", subject: subjects.answers("*", "*") },
  { kind: "stream", subject: subjects.executorControl("*", "*") },
];

/**
 * One executor's allow lists (everything else is denied): claim, heartbeat, query and publish
 * receipts, and ask for the control messages it missed, in its scope and under its own executor
 * token only (so it cannot speak for another executor of the scope); pull and acknowledge only its
 * scope's candidate consumer; receive only its own answers, control messages and inbox.
 */
export function executorPermissions(scope: string, executorId: string): SubjectPermissions {
  const consumer = candidateConsumer(scope);
  return {
    publish: [
      subjects.claim(scope, executorId),
      subjects.presence(scope, executorId),
      subjects.heldClaims(scope, executorId),
      subjects.receiptQuery(scope, executorId),
      subjects.controlQuery(scope, executorId),
      subjects.receipt(scope, executorId, "*"),
      jsApi(EXECUTOR_JS_API_PREFIX, "INFO", consumer),
      jsApi(EXECUTOR_JS_API_PREFIX, "MSG.NEXT", consumer),
      ...candidateAckSubjects(consumer),
    ],
    subscribe: [subjects.answers(scope, executorId), subjects.executorControl(scope, executorId), `${executorInboxPrefix(scope, executorId)}.>`],
  };
}

export interface NatsAuthInput {
  /** Public nkeys of the gateway (two during a rotation); they get the whole gateway account. */
  gatewayNkeys: readonly string[];
  executors: readonly Executor[];
  /** Shown in the header comment (never a time, so regenerating an unchanged registry is a no-op). */
  generatedBy?: string;
}

const q = (s: string) => JSON.stringify(s);
const list = (items: string[]) => `[${items.map(q).join(", ")}]`;

/** The `accounts { … }` block for the server config (include it with `include "auth.conf"`). */
export function renderNatsAuth(input: NatsAuthInput): string {
  if (input.gatewayNkeys.length === 0) throw new Error("at least one gateway nkey is needed");
  const importers = list([EXECUTORS_ACCOUNT]);
  const exportLines = EXECUTOR_EXPORTS.map((e) =>
    e.kind === "service"
      ? `      { service: ${q(e.subject)}${e.responseType ? `, response_type: ${e.responseType}` : ""}, accounts: ${importers} }`
      : `      { stream: ${q(e.subject)}, accounts: ${importers} }`,
  );
  const importLines = EXECUTOR_EXPORTS.map(
    (e) =>
      `      { ${e.kind}: { account: ${q(GATEWAY_ACCOUNT)}, subject: ${q(e.subject)} }${e.importAs ? `, to: ${q(e.importAs)}` : ""}${e.share ? ", share: true" : ""} }`,
  );
  const executors = [...input.executors].sort((a, b) => a.executor_id.localeCompare(b.executor_id));
  const userLines = executors.flatMap((ex) => {
    const p = executorPermissions(ex.scope, ex.executor_id);
    return ex.nkeys.map(
      (key) =>
        `      # executor ${ex.executor_id}, scope ${ex.scope}\n` +
        `      { nkey: ${q(key)}, permissions: { publish: { allow: ${list(p.publish)} }, subscribe: { allow: ${list(p.subscribe)} } } }`,
    );
  });
  return [
    `# NATS authorization for toolgate, generated by ${input.generatedBy ?? "toolgate nats-config"}; do not edit by hand.`,
    `# ${executors.length} executor(s). Regenerate after registering, rotating or removing one, then reload`,
    "# the server (nats-server --signal reload). Only public keys appear here.",
    "accounts {",
    `  ${GATEWAY_ACCOUNT} {`,
    "    jetstream: enabled",
    "    users: [",
    ...input.gatewayNkeys.map((key) => `      { nkey: ${q(key)} }`),
    "    ]",
    "    exports: [",
    ...exportLines,
    "    ]",
    "  }",
    `  ${EXECUTORS_ACCOUNT} {`,
    "    users: [",
    ...userLines,
    "    ]",
    "    imports: [",
    ...importLines,
    "    ]",
    "  }",
    "}",
    "",
  ].join("\n");
}
