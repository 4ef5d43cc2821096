/** `NATS_URL` may name several servers (a cluster), comma-separated; the client wants a list. */
export function natsServers(url: string): string[] {
  return url
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}
