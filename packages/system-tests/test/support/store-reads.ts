/**
 * Which reads of credentials or organisations a service sent to Postgres through a TcpProxy while
 * something ran: what a request answered from the credential cache must not send. Counted by
 * statement, not by byte, so the statements a service sends on its own schedule (the instance
 * registry's heartbeat, the last-use flush, the webhook outbox) neither hide a read nor pass for one,
 * however slowly the machine runs the requests.
 */
import type { TcpProxy } from '@cos/test-support/tcp-proxy';

/** A statement reading the api_keys or organisations table (the credential lookup, findById, …). */
export const STORE_READ = /\bFROM (?:api_keys|organisations)\b/;

/** The SQL of every credential or organisation read sent through `proxy` while `during` ran. */
export async function storeReadsDuring(proxy: TcpProxy, during: () => Promise<void>): Promise<readonly string[]> {
  const watch = proxy.watch(STORE_READ);
  try {
    await during();
  } finally {
    watch.stop();
  }
  return watch.seen;
}
