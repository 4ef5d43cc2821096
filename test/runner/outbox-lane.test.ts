import { describe, expect, it } from "vitest";
import { createLogger } from "../../src/log/logger.js";
import { Outbox } from "../../src/runner/outbox.js";
import type { NatsLink } from "../../src/runner/nats-link.js";
import { buildReceipt } from "../../src/runner/receipts.js";
import type { OutboxReceipt, RunnerStore } from "../../src/runner/store.js";
import type { Grant, Receipt } from "../../src/wire/messages.js";
import { sampleGrant } from "./helpers/grants.js";
import { until } from "../helpers/until.js";

/**
 * The order of one claim's lane, microtask by microtask. The gateway and the store are stand-ins
 * here (the link answers every receipt at once, the store saves nothing): what is under test is
 * when the lane sends, which no real gateway or disk can time to the microtask.
 */
describe("Outbox lane", () => {
  const grant = sampleGrant();
  const progress = (seq: number) => buildReceipt(grant, { kind: "progress", seq, progress: { step: seq } }, 0);
  const completed = buildReceipt(grant, { kind: "completed", result: { ok: true } }, 0);

  function outboxWith(opts: { saving: (receipt: OutboxReceipt) => Promise<void>; onAnswered: (receipt: OutboxReceipt) => Promise<void> }) {
    const sent: string[] = [];
    const link = {
      postReceipt(receipt: Receipt) {
        sent.push(receipt.receipt_id);
        queueMicrotask(() =>
          outbox.handleAnswer({ receipt_id: receipt.receipt_id, assignment_id: receipt.assignment_id, kind: receipt.kind, status: "recorded" }),
        );
      },
    } as unknown as NatsLink;
    const store = { appendReceipt: (receipt: OutboxReceipt) => opts.saving(receipt) } as unknown as RunnerStore;
    const outbox: Outbox = new Outbox(
      store,
      link,
      { answerTimeoutMs: 60_000, maxResendIntervalMs: 60_000, progressLingerMs: 0, acceptedLingerMs: 0 },
      createLogger({ level: "silent" }),
      (receipt) => opts.onAnswered(receipt),
    );
    return { outbox, sent };
  }

  /** A store's save that holds every final receipt until `release` is called (any other saves at once). */
  function finalSaveHeld() {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    return { saving: (receipt: OutboxReceipt) => (receipt.kind === "completed" ? held : Promise.resolve()), release };
  }

  it("sends a receipt saved while the lane's drain is finishing (its loop found the queue empty)", async () => {
    // The last receipt of the claim finishes saving in the same turn as the answer to the one before
    // it, two microtasks after that answer was recorded: after the drain's loop found nothing left,
    // before the drain's promise settled.
    // Its own save, not `finalSaveHeld`'s: the microtasks between the release and the save's end are what is timed.
    let saved!: () => void;
    const save = new Promise<void>((resolve) => (saved = resolve));
    const { outbox, sent } = outboxWith({
      saving: async (receipt) => {
        if (receipt.kind === "completed") await save;
      },
      onAnswered: async (receipt) => {
        if (receipt.kind === "progress") saved();
      },
    });
    outbox.send(grant, [progress(1)]);
    const appended = outbox.append(grant, completed);
    await appended;
    await outbox.flush(1_000);
    expect(sent).toEqual([progress(1).receiptId, completed.receiptId]);
    outbox.close();
  });

  it("sends a claim's receipts one after the other's answer, in save order", async () => {
    const answered: string[] = [];
    const { outbox, sent } = outboxWith({
      saving: async () => undefined,
      onAnswered: async (receipt) => {
        answered.push(receipt.receiptId);
      },
    });
    const receipts = [progress(1), progress(2), completed];
    for (const receipt of receipts) await outbox.append(grant, receipt);
    await outbox.flush(1_000);
    expect(sent).toEqual(receipts.map((r) => r.receiptId));
    expect(answered).toEqual(sent);
    outbox.close();
  });

  describe("under a gateway that keeps receipts sent ahead in order", () => {
    const accepted = buildReceipt(grant, { kind: "accepted", operation_key: grant.operation_key, argument_digest: grant.argument_digest }, 0);

    /** A link that answers only when told to, and records each send with the receipt it names (`Tg-After`). */
    function withManualAnswers(
      ahead: boolean,
      progressLingerMs = 60_000,
      saving: (receipt: OutboxReceipt) => Promise<void> = async () => undefined,
      claim: Grant = grant,
      acceptedLingerMs = 0,
    ) {
      const sent: Array<{ id: string; after: string | undefined }> = [];
      const answered: string[] = [];
      const link = {
        postReceipt(receipt: Receipt, after?: string) {
          sent.push({ id: receipt.receipt_id, after });
        },
      } as unknown as NatsLink;
      const store = { appendReceipt: saving } as unknown as RunnerStore;
      const timing = { answerTimeoutMs: 60_000, maxResendIntervalMs: 60_000, progressLingerMs, acceptedLingerMs };
      const outbox = new Outbox(store, link, timing, createLogger({ level: "silent" }), async (receipt) => {
        answered.push(receipt.receiptId);
      });
      if (ahead) outbox.sendAheadFor(claim);
      const answer = (r: OutboxReceipt, status: "recorded" | "rejected" = "recorded") =>
        outbox.handleAnswer({ receipt_id: r.receiptId, assignment_id: r.assignmentId, kind: r.kind, status });
      return { outbox, sent, answered, answer };
    }
    const turns = async () => {
      for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    };

    it("sends the final receipt behind an unanswered progress report, naming it; nothing overtakes accepted; answers are taken in order", async () => {
      const { outbox, sent, answered, answer } = withManualAnswers(true);
      outbox.send(grant, [accepted]);
      await outbox.append(grant, progress(1));
      await turns();
      expect(sent).toEqual([{ id: accepted.receiptId, after: undefined }]);
      answer(accepted);
      await turns();
      await outbox.append(grant, completed);
      await turns();
      expect(sent).toEqual([
        { id: accepted.receiptId, after: undefined },
        { id: progress(1).receiptId, after: undefined },
        { id: completed.receiptId, after: progress(1).receiptId },
      ]);
      answer(completed);
      await turns();
      expect(answered).toEqual([accepted.receiptId]);
      answer(progress(1));
      await outbox.flush(1_000);
      expect(answered).toEqual([accepted.receiptId, progress(1).receiptId, completed.receiptId]);
      outbox.close();
    });

    /** `lane` with its claim's `accepted` sent and answered. */
    const confirmed = async (lane: ReturnType<typeof withManualAnswers>) => {
      lane.outbox.send(grant, [accepted]);
      lane.answer(accepted);
      await turns();
      return lane;
    };
    /** The progress report, then the final receipt naming it, as sent. */
    const reportThenFinal = [
      { id: progress(1).receiptId, after: undefined },
      { id: completed.receiptId, after: progress(1).receiptId },
    ];

    it("holds a progress report back until the receipt saved behind it, and sends the two in one turn, in order", async () => {
      const { outbox, sent, answer } = await confirmed(withManualAnswers(true));
      await outbox.append(grant, progress(1));
      await turns();
      expect(sent.map((s) => s.id)).toEqual([accepted.receiptId]);
      outbox.send(grant, [completed]);
      // Nothing of the two went out in the call that queued the final receipt: the report leaves first.
      expect(sent.map((s) => s.id)).toEqual([accepted.receiptId]);
      await Promise.resolve();
      await Promise.resolve();
      expect(sent.slice(1)).toEqual(reportThenFinal);
      answer(progress(1));
      answer(completed);
      await outbox.flush(1_000);
      outbox.close();
    });

    it("sends a progress report nothing follows once its linger is over", async () => {
      const { outbox, sent, answer } = await confirmed(withManualAnswers(true, 20));
      await outbox.append(grant, progress(1));
      await turns();
      expect(sent).toHaveLength(1);
      await new Promise((r) => setTimeout(r, 40));
      expect(sent.at(-1)).toEqual({ id: progress(1).receiptId, after: undefined });
      answer(progress(1));
      await outbox.flush(1_000);
      outbox.close();
    });

    it("keeps a progress report back past its linger while the receipt behind it is being saved", async () => {
      const { saving, release: saved } = finalSaveHeld();
      const { outbox, sent, answer } = await confirmed(withManualAnswers(true, 10, saving));
      await outbox.append(grant, progress(1));
      const appended = outbox.append(grant, completed);
      await new Promise((r) => setTimeout(r, 40));
      expect(sent).toHaveLength(1);
      saved();
      await appended;
      await turns();
      expect(sent.slice(1)).toEqual(reportThenFinal);
      answer(progress(1));
      answer(completed);
      await outbox.flush(1_000);
      outbox.close();
    });

    it("sends nothing ahead when the gateway did not say it keeps the order", async () => {
      const { outbox, sent, answer } = withManualAnswers(false);
      await outbox.append(grant, progress(1));
      await outbox.append(grant, completed);
      await turns();
      expect(sent).toEqual([{ id: progress(1).receiptId, after: undefined }]);
      answer(progress(1));
      await turns();
      expect(sent.at(-1)).toEqual({ id: completed.receiptId, after: undefined });
      answer(completed);
      await outbox.flush(1_000);
      outbox.close();
    });

    describe("a read, which runs before its accepted is answered", () => {
      const read = sampleGrant({ assignment_id: "asg-read", tool_kind: "read", tool_name: "tasks.read" });
      const readAccepted = buildReceipt(read, { kind: "accepted", operation_key: read.operation_key, argument_digest: read.argument_digest }, 0);
      const readProgress = buildReceipt(read, { kind: "progress", seq: 1, progress: { step: 1 } }, 0);
      const readCompleted = buildReceipt(read, { kind: "completed", result: { ok: true } }, 0);
      /** `accepted`, then the report and the outcome behind it, each naming the one before: as sent. */
      const threeInOrder = [
        { id: readAccepted.receiptId, after: undefined },
        { id: readProgress.receiptId, after: readAccepted.receiptId },
        { id: readCompleted.receiptId, after: readProgress.receiptId },
      ];

      it("sends its report and outcome behind its unanswered accepted, the report naming accepted, once the outcome is saved", async () => {
        const { outbox, sent, answered, answer } = withManualAnswers(true, 60_000, undefined, read);
        outbox.send(read, [readAccepted]);
        await outbox.append(read, readProgress);
        await turns();
        // A report alone behind accepted waits for what follows it.
        expect(sent).toEqual([{ id: readAccepted.receiptId, after: undefined }]);
        await outbox.append(read, readCompleted);
        await turns();
        expect(sent).toEqual(threeInOrder);
        answer(readProgress);
        answer(readCompleted);
        await turns();
        expect(answered).toEqual([]); // answers are taken in order: accepted's first
        answer(readAccepted);
        await outbox.flush(1_000);
        expect(answered).toEqual([readAccepted.receiptId, readProgress.receiptId, readCompleted.receiptId]);
        outbox.close();
      });

      /** A lane whose read's `accepted` lingers up to `acceptedLingerMs`, held back so far. */
      const lingering = async (acceptedLingerMs: number) => {
        const lane = withManualAnswers(true, 60_000, undefined, read, acceptedLingerMs);
        lane.outbox.send(read, [readAccepted]);
        await turns();
        expect(lane.sent).toEqual([]);
        return lane;
      };

      it("holds its accepted back until its outcome is saved, then sends accepted, report and outcome in one turn", async () => {
        const { outbox, sent, answer } = await lingering(60_000);
        // A report alone is not the outcome: accepted waits on.
        await outbox.append(read, readProgress);
        await turns();
        expect(sent).toEqual([]);
        await outbox.append(read, readCompleted);
        await turns();
        expect(sent).toEqual(threeInOrder);
        for (const r of [readAccepted, readProgress, readCompleted]) answer(r);
        await outbox.flush(1_000);
        outbox.close();
      });

      it("holds its accepted on past the linger while the read's outcome is being saved, then sends the three together", async () => {
        const { saving, release: saved } = finalSaveHeld();
        const { outbox, sent, answer } = withManualAnswers(true, 60_000, saving, read, 10);
        outbox.send(read, [readAccepted]);
        await outbox.append(read, readProgress);
        const appended = outbox.append(read, readCompleted);
        await new Promise((r) => setTimeout(r, 40));
        expect(sent).toEqual([]);
        saved();
        await appended;
        await turns();
        expect(sent).toEqual(threeInOrder);
        for (const r of [readAccepted, readProgress, readCompleted]) answer(r);
        await outbox.flush(1_000);
        outbox.close();
      });

      it("does not wait out a save that outlasts 250 ms past the linger: its accepted leaves alone", async () => {
        const { saving, release: saved } = finalSaveHeld();
        const { outbox, sent, answer } = withManualAnswers(true, 60_000, saving, read, 10);
        outbox.send(read, [readAccepted]);
        const appended = outbox.append(read, readCompleted);
        await new Promise((r) => setTimeout(r, 150));
        expect(sent).toEqual([]);
        await until("accepted sent alone", async () => (sent.length > 0 ? true : undefined), 2_000);
        expect(sent).toEqual([{ id: readAccepted.receiptId, after: undefined }]);
        saved();
        await appended;
        answer(readAccepted);
        await turns();
        answer(readCompleted);
        await outbox.flush(1_000);
        outbox.close();
      });

      it("sends its accepted alone once the linger is over, and a write's at once", async () => {
        const { outbox, sent, answer } = await lingering(20);
        await new Promise((r) => setTimeout(r, 40));
        expect(sent).toEqual([{ id: readAccepted.receiptId, after: undefined }]);
        answer(readAccepted);
        await outbox.flush(1_000);
        outbox.close();

        const write = withManualAnswers(true, 60_000, undefined, grant, 60_000);
        write.outbox.send(grant, [accepted]);
        expect(write.sent).toEqual([{ id: accepted.receiptId, after: undefined }]);
        write.answer(accepted);
        await write.outbox.flush(1_000);
        write.outbox.close();
      });

      it("sends its lingering accepted at once when told its outcome will wait for the answer (a submission)", async () => {
        const { outbox, sent, answer } = await lingering(60_000);
        outbox.sendLingering(read);
        await turns();
        expect(sent).toEqual([{ id: readAccepted.receiptId, after: undefined }]);
        answer(readAccepted);
        await outbox.flush(1_000);
        outbox.close();
      });

      it("still sends, in order, what is queued behind an accepted the gateway refused: every saved receipt gets its answer", async () => {
        const { outbox, sent, answered, answer } = withManualAnswers(false, 60_000, undefined, read);
        outbox.send(read, [readAccepted]);
        await outbox.append(read, readProgress);
        await outbox.append(read, readCompleted);
        await turns();
        expect(sent.map((s) => s.id)).toEqual([readAccepted.receiptId]);
        answer(readAccepted, "rejected");
        await turns();
        expect(sent.map((s) => s.id)).toEqual([readAccepted.receiptId, readProgress.receiptId]);
        answer(readProgress, "rejected");
        await turns();
        answer(readCompleted, "rejected");
        await outbox.flush(1_000);
        expect(answered).toEqual([readAccepted.receiptId, readProgress.receiptId, readCompleted.receiptId]);
        outbox.close();
      });
    });
  });

  describe("under a gateway that takes a read's first receipts as one message", () => {
    /** The lane's sends: each message's receipts, the receipt it names (`Tg-After`), and whether it asked for a PubAck (a resend). */
    function chainLane(claim: Grant, { answerTimeoutMs = 60_000, chainFails = false } = {}) {
      const sent: Array<{ ids: string[]; after?: string; pubAck: boolean }> = [];
      const answered: string[] = [];
      const link = {
        postReceipt: (r: Receipt, after?: string) => void sent.push({ ids: [r.receipt_id], ...(after ? { after } : {}), pubAck: false }),
        postChain: (rs: Receipt[]) => {
          if (chainFails) throw new Error("connection closed");
          sent.push({ ids: rs.map((r) => r.receipt_id), pubAck: false });
        },
        // Nothing stored answers a query: the receipt is sent again.
        queryReceipt: async () => {
          throw new Error("no answer");
        },
        publishReceipt: async (r: Receipt, after?: string) => {
          sent.push({ ids: [r.receipt_id], ...(after ? { after } : {}), pubAck: true });
          return { duplicate: false };
        },
      } as unknown as NatsLink;
      const store = { appendReceipt: async () => undefined } as unknown as RunnerStore;
      const timing = { answerTimeoutMs, maxResendIntervalMs: 60_000, progressLingerMs: 60_000, acceptedLingerMs: 60_000 };
      const outbox = new Outbox(store, link, timing, createLogger({ level: "silent" }), async (receipt) => void answered.push(receipt.receiptId));
      outbox.sendAheadFor(claim);
      outbox.sendChainsFor(claim);
      const answer = (r: OutboxReceipt, status: "recorded" | "pending" = "recorded") =>
        outbox.handleAnswer({ receipt_id: r.receiptId, assignment_id: r.assignmentId, kind: r.kind, status });
      const receipts = [
        buildReceipt(claim, { kind: "accepted", operation_key: claim.operation_key, argument_digest: claim.argument_digest }, 0),
        buildReceipt(claim, { kind: "progress", seq: 1, progress: { step: 1 } }, 0),
        buildReceipt(claim, { kind: "completed", result: { ok: true } }, 0),
      ] as const;
      return { outbox, sent, answered, answer, receipts };
    }
    const turns = async () => {
      for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    };
    /** Saves a read's three receipts as its handler does: `accepted` first, the read's report and outcome behind it. */
    const saveAll = async ({ outbox, receipts }: ReturnType<typeof chainLane>, claim: Grant) => {
      outbox.send(claim, [receipts[0]]);
      await outbox.append(claim, receipts[1]);
      await outbox.append(claim, receipts[2]);
      await turns();
    };

    it("sends a read's accepted, report and outcome in one message, and alone, behind the one before, those answered pending", async () => {
      const read = sampleGrant({ tool_kind: "read", assignment_id: "asg-chain" });
      const lane = chainLane(read);
      const [accepted, report, outcome] = lane.receipts;
      await saveAll(lane, read);
      expect(lane.sent).toEqual([{ ids: [accepted.receiptId, report.receiptId, outcome.receiptId], pubAck: false }]);
      // Not applied whole (say the record had no room for the report): `accepted` decided, the others not taken.
      lane.answer(accepted);
      lane.answer(report, "pending");
      lane.answer(outcome, "pending");
      await turns();
      expect(lane.sent.slice(1)).toEqual([
        { ids: [report.receiptId], after: accepted.receiptId, pubAck: true },
        { ids: [outcome.receiptId], after: report.receiptId, pubAck: true },
      ]);
      lane.answer(report);
      lane.answer(outcome);
      await lane.outbox.flush(1_000);
      expect(lane.answered).toEqual([accepted.receiptId, report.receiptId, outcome.receiptId]);
      lane.outbox.close();
    });

    it("resends alone, asking for the PubAck, the receipts of a chain it could not publish", async () => {
      const read = sampleGrant({ tool_kind: "read", assignment_id: "asg-unsent" });
      const lane = chainLane(read, { answerTimeoutMs: 20, chainFails: true });
      await saveAll(lane, read);
      expect(lane.sent).toEqual([]);
      await until("the three resent alone", async () => (lane.sent.length >= 3 ? true : undefined));
      expect(lane.sent.slice(0, 3).every((s) => s.pubAck && s.ids.length === 1)).toBe(true);
      expect(new Set(lane.sent.map((s) => s.ids[0]))).toEqual(new Set(lane.receipts.map((r) => r.receiptId)));
      // The lane still takes their answers, in order, and records them.
      for (const r of lane.receipts) lane.answer(r);
      await lane.outbox.flush(1_000);
      expect(lane.answered).toEqual(lane.receipts.map((r) => r.receiptId));
      lane.outbox.close();
    });

    it("sends a write's receipts, and those of a read's later generation, each in a message of its own", async () => {
      const write = sampleGrant({ assignment_id: "asg-write" });
      const writeLane = chainLane(write);
      await saveAll(writeLane, write);
      // Nothing goes before a write's `accepted` is answered.
      expect(writeLane.sent).toEqual([{ ids: [writeLane.receipts[0].receiptId], pubAck: false }]);
      writeLane.outbox.close();
      // The executor may have published on the subject under an earlier generation, where the stream would refuse a chain.
      const again = sampleGrant({ tool_kind: "read", assignment_id: "asg-again", generation: 1 });
      const readLane = chainLane(again);
      await saveAll(readLane, again);
      expect(readLane.sent.map((s) => s.ids)).toEqual(readLane.receipts.map((r) => [r.receiptId]));
      readLane.outbox.close();
    });
  });
});
