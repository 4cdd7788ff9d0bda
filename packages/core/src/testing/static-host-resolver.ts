/**
 * A WebhookHostResolver answering from a table, as /etc/hosts would: a name maps to its addresses,
 * or to a function giving them per call (a name whose DNS answer changes between lookups, as in a
 * rebinding attack). Unknown names resolve to nothing. Every lookup is recorded in `calls`.
 */
import type { WebhookHostResolver } from '../ports/webhook-sender.js';

export class StaticHostResolver implements WebhookHostResolver {
  readonly calls: string[] = [];

  constructor(private readonly table: Readonly<Record<string, readonly string[] | ((call: number) => readonly string[])>>) {}

  resolve(hostname: string): Promise<readonly string[]> {
    this.calls.push(hostname);
    const entry = this.table[hostname.toLowerCase()];
    const count = this.calls.filter((h) => h === hostname).length;
    return Promise.resolve(entry === undefined ? [] : typeof entry === 'function' ? entry(count) : entry);
  }
}
