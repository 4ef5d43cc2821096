/** The receipt index lookups a gateway counted so far, by outcome, from its `/metrics` (`toolgate_receipt_index_lookups_total`). */
export async function receiptIndexLookups(baseUrl: string): Promise<{ read: number; skipped: number }> {
  const text = await (await fetch(`${baseUrl}/metrics`)).text();
  const count = (outcome: string) => {
    const line = text.split("\n").find((l) => l.startsWith(`toolgate_receipt_index_lookups_total{outcome="${outcome}"} `));
    return line === undefined ? 0 : Number(line.split(" ")[1]);
  };
  return { read: count("read"), skipped: count("skipped") };
}
