import type { ReceiptKind, ReceiptStatus } from "../wire/messages.js";

/**
 * The state machine of one local assignment (one claim held by this executor), as one table.
 *
 *   (grant) ──▶ accepting ──confirm──▶ confirmed ──start──▶ running ──report──▶ reporting ──settle──▶ settled
 *      │            ├──refuse──▶ refused       └──report──────────────────────────▲   ├──await──▶ awaiting_reconciliation
 *      │            └──report (a read run ahead)───────────────────────────────────┘   └──refuse──▶ refused (read ahead)
 *      └── refusal (digest, arguments, authorize): `refused` saved ──▶ reporting            └──reconcile──┘
 *   confirmed / running ──submit──▶ submitted ──report──▶ reporting   (a task left running: `runner.tasks`)
 *
 * `running` is written *before* a write handler is called: after a crash, `confirmed` proves the
 * handler never started (safe to start it), `running` means side effects may exist. A read has no
 * side effects by contract and runs again after a crash either way, so it runs unmarked in
 * `confirmed` and reports from there; it may even start once its `accepted` is sent, before the
 * answer (`accepting`): its outcome is saved meanwhile and follows `accepted`, which the gateway
 * applies only behind a `recorded` answer (a refusal makes it `refused` whichever came first).
 */
export const PHASES = ["accepting", "confirmed", "running", "submitted", "reporting", "awaiting_reconciliation", "settled", "refused"] as const;
export type Phase = (typeof PHASES)[number];

export type PhaseEvent =
  /** The gateway recorded `accepted`: side effects may start. */
  | "confirm"
  /** The gateway refused `accepted` (claim revoked, lease expired, run terminated): never run, or a read run ahead of the answer is never reported. */
  | "refuse"
  /** A write handler is about to be called. */
  | "start"
  /** The handler returned a submission: its receipt was saved, the task goes on in the background. */
  | "submit"
  /** A final receipt was saved in the outbox. */
  | "report"
  /** The final receipt was answered. */
  | "settle"
  /** The `reconciliation_required` receipt was answered: the product must settle it. */
  | "await_reconciliation"
  /** The product settled it (`runner.reconcile`): a new final receipt was saved. */
  | "reconcile";

const TRANSITIONS: Readonly<Record<Phase, Partial<Record<PhaseEvent, Phase>>>> = {
  accepting: { confirm: "confirmed", refuse: "refused", report: "reporting" },
  confirmed: { start: "running", report: "reporting", submit: "submitted" },
  running: { report: "reporting", submit: "submitted" },
  submitted: { report: "reporting" },
  reporting: { settle: "settled", await_reconciliation: "awaiting_reconciliation", refuse: "refused" },
  awaiting_reconciliation: { reconcile: "reporting" },
  settled: {},
  refused: {},
};

/** Phases a local assignment never leaves. */
export const FINAL_PHASES: ReadonlySet<Phase> = new Set(["settled", "refused"]);

export class IllegalTransitionError extends Error {
  override readonly name = "IllegalTransitionError";
}

/** The compare-and-set change for `event` in `from`; throws when the table does not allow it. */
export function transition(from: Phase, event: PhaseEvent): { from: Phase; to: Phase } {
  const to = TRANSITIONS[from][event];
  if (to === undefined) throw new IllegalTransitionError(`'${event}' is not allowed in phase '${from}'`);
  return { from, to };
}

/**
 * What the gateway's definitive answer to a receipt does to the local assignment in `phase` (undefined:
 * nothing). A rejected final receipt settles too: resending the same body cannot change the verdict,
 * and the answer stays on the receipt in the store for the operator.
 */
export function answerChange(kind: ReceiptKind, status: Exclude<ReceiptStatus, "pending">, phase: Phase): { from: Phase; to: Phase } | undefined {
  // A claim that ended here changes no more: a read's receipts saved behind an `accepted` the gateway
  // refused still leave (every saved receipt is answered), and their answers say only that.
  if (FINAL_PHASES.has(phase)) return undefined;
  switch (kind) {
    case "accepted":
      // Only an explicit `recorded` allows side effects (the outbox resolves a `duplicate` first). A
      // read that ran ahead and saved its outcome (`reporting`) keeps it queued on `recorded`.
      if (phase === "reporting") return status === "recorded" ? undefined : transition("reporting", "refuse");
      return transition("accepting", status === "recorded" ? "confirm" : "refuse");
    case "progress":
    case "submission":
      // A task keeps running whatever the answer (a late one included): its product still reports how it ended.
      return undefined;
    case "reconciliation_required":
      // Still unknown whether the business happened: the product settles it with `reconcile`,
      // unless the run is over (late_ignored), when nothing can change any more.
      return transition("reporting", status === "late_ignored" ? "settle" : "await_reconciliation");
    default:
      return transition("reporting", "settle");
  }
}
