/**
 * Single statements outside a unit of work on Postgres, without knex's per-query machinery.
 *
 * `knex.raw(sql, bindings)` builds a Raw, a Runner, re-renders `?` placeholders as `$n` on every
 * call, emits query events and wraps the answer; measured with 50 concurrent callers that was ~57 µs
 * of Node CPU per statement on top of ~77 µs for the pool and `pg` themselves. This path keeps what
 * matters and drops the rest: the connection comes from the same knex pool through the client's own
 * `acquireConnection` (the pg-client.ts deadline starts there, C-17; a pool timeout still becomes
 * KnexTimeoutError), the statement goes through the client's `_query` (deadline per statement,
 * disposal of a timed-out connection, prepared-statement names), and the connection goes back to the
 * pool. The `$n` text of each statement is rendered once. Transactions stay on knex. A listener on
 * the knex instance's `query` event still sees every statement (same `sql`, `bindings`, `method`);
 * nothing is built for it when nobody listens.
 */
import type { Knex } from 'knex';

interface PgResponse {
  rows: Record<string, unknown>[];
  rowCount: number | null;
}
interface DirectClient {
  acquireConnection(): Promise<unknown>;
  releaseConnection(connection: unknown): Promise<unknown>;
  _query(connection: unknown, obj: { sql: string; bindings: readonly unknown[]; options: Record<string, unknown>; method: string }): Promise<{ response?: PgResponse }>;
  positionBindings(sql: string): string;
}

export class PgDirect {
  private readonly texts = new Map<string, string>();

  constructor(
    private readonly knex: Knex,
    private readonly client: DirectClient,
  ) {}

  /** The knex instance's client, when it has the methods this path needs (knex 3's pg client does). */
  static of(knex: Knex): PgDirect | undefined {
    const client = knex.client as unknown as Partial<DirectClient>;
    const usable =
      typeof client.acquireConnection === 'function' &&
      typeof client.releaseConnection === 'function' &&
      typeof client._query === 'function' &&
      typeof client.positionBindings === 'function';
    return usable ? new PgDirect(knex, client as DirectClient) : undefined;
  }

  async run(sql: string, bindings: readonly unknown[]): Promise<PgResponse> {
    let text = this.texts.get(sql);
    if (text === undefined) {
      text = this.client.positionBindings(sql);
      this.texts.set(sql, text);
    }
    const connection = await this.client.acquireConnection();
    try {
      if (this.knex.listenerCount('query') > 0) {
        const { __knexUid } = connection as { __knexUid?: unknown };
        this.knex.emit('query', { __knexUid, __knexTxId: undefined, method: 'raw', sql: text, bindings, options: {} });
      }
      const obj = await this.client._query(connection, { sql: text, bindings, options: {}, method: 'raw' });
      return obj.response ?? { rows: [], rowCount: 0 };
    } finally {
      await this.client.releaseConnection(connection);
    }
  }
}
