import { writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { nkeys } from "@nats-io/transport-node";
import { UsageError, type Command } from "../command.js";

const usage = `Usage: toolgate nkey --seed-out FILE

Creates a NATS user nkey pair. The seed (the secret) is written to FILE with mode 0600 and is never
printed; an existing FILE is never overwritten. The public key (U…) is printed: register it with
POST /v1/executors (or pass it to 'toolgate nats-config --gateway-nkey' for the gateway).

  --seed-out FILE   where to write the seed`;

export const nkeyCommand: Command = {
  name: "nkey",
  summary: "Create a NATS user nkey: seed to a 0600 file, public key on stdout",
  usage,
  async run(argv) {
    const { values } = parseArgs({ args: argv, options: { "seed-out": { type: "string" } } });
    const out = values["seed-out"];
    if (!out) throw new UsageError("--seed-out FILE is required (the seed is never printed)");
    const pair = nkeys.createUser();
    writeFileSync(out, new TextDecoder().decode(pair.getSeed()) + "\n", { mode: 0o600, flag: "wx" });
    process.stdout.write(pair.getPublicKey() + "\n");
    return 0;
  },
};
