import { connect, type NatsConnection } from "@nats-io/transport-node";

/**
 * Counts the direct gets a gateway makes of one KV bucket's stream (`$JS.API.DIRECT.GET.KV_<bucket>`),
 * seen by a spy connection of its own: how many reads an awaited step made.
 */
export class DirectReads {
  private seen = 0;

  private constructor(private readonly spy: NatsConnection) {}

  static async of(natsUrl: string, bucket: string): Promise<DirectReads> {
    const reads = new DirectReads(await connect({ servers: natsUrl }));
    reads.spy.subscribe(`$JS.API.DIRECT.GET.KV_${bucket}.>`, { callback: () => void reads.seen++ });
    await reads.spy.flush();
    return reads;
  }

  /** `step`'s value and the reads made while it ran (the spy's connection flushed on both sides, so none is missed or early). */
  async during<T>(step: () => Promise<T>): Promise<{ value: T; reads: number }> {
    await this.spy.flush();
    const before = this.seen;
    const value = await step();
    await this.spy.flush();
    return { value, reads: this.seen - before };
  }

  close(): Promise<void> {
    return this.spy.close();
  }
}
