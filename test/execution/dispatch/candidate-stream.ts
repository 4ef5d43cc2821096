import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import { ensureStreams, loadDefinitions } from "../../../src/streams/index.js";
import { STREAMS } from "../../../src/streams/names.js";
import type { Candidate } from "../../../src/wire/messages.js";
import { startTestNats, type TestNats } from "../../helpers/nats.js";

/** Candidate `n` of one run's `tasks` binding, generation 0. */
export const candidate = (n: number): Candidate => ({
  assignment_id: `asg-${n}`,
  run_id: "run-1",
  tool_name: "tasks.read",
  binding_id: "tasks",
  generation: 0,
  created_at: 0,
});

/** A test NATS holding only the candidates stream, a connection and its JetStream manager. */
export interface CandidateStream {
  readonly nats: TestNats;
  readonly nc: NatsConnection;
  readonly jsm: JetStreamManager;
  close(): Promise<void>;
}

export async function startCandidateStream(): Promise<CandidateStream> {
  const nats = await startTestNats();
  const nc = await connect({ servers: nats.url });
  const jsm = await jetstreamManager(nc);
  await ensureStreams(
    jsm,
    loadDefinitions().filter((d) => d.kind === "stream" && d.name === STREAMS.candidates),
    { replicas: 1 },
  );
  return {
    nats,
    nc,
    jsm,
    async close() {
      await nc.close();
      await nats.stop();
    },
  };
}
