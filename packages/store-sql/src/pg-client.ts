/**
 * knex's pg client with one deadline per store operation (C-17: an answer within 2 s even when the
 * network to Postgres is blackholed). Plugged in through knex's documented `client: <class>` option;
 * the pool, the query builder and transactions stay knex's.
 *
 *  - The deadline starts when the operation asks the pool for a connection: a plain query, or a
 *    whole unit of work (knex.transaction acquires once and runs BEGIN … COMMIT on that connection).
 *    Every statement gets pg's client-side `query_timeout` set to the time left, so waiting for the
 *    pool and waiting for the server never add up past the budget. No extra round trip: pg arms one
 *    timer per query either way.
 *  - A statement the server did not answer in time leaves the pg connection with a query in flight:
 *    anything sent after it (a ROLLBACK, the next request's query) would queue behind it. So on a
 *    client-side timeout the connection is marked disposed (knex's pool validator then destroys it
 *    instead of handing it out again) and closed at once (pg destroys the socket of a client with a
 *    query in flight).
 *  - A ROLLBACK on a connection that is disposed (timed out, reset, ended) is not sent: the session
 *    is gone or going, so its transaction can never commit, and Postgres rolls it back when the
 *    session ends. knex then rejects the transaction with the original error instead of waiting
 *    for, or failing on, the ROLLBACK.
 */
import { createRequire } from 'node:module';
import type { Knex } from 'knex';

const require = createRequire(import.meta.url);

const DEADLINE = Symbol('cos.deadline');

interface PgConnection {
  /** Set by knex's pg client on 'error'/'end'; its pool validator drops such connections. */
  __knex__disposed?: unknown;
  [DEADLINE]?: number;
  end(): Promise<void>;
}
interface QueryObject {
  sql?: string;
  bindings?: readonly unknown[];
  options?: Record<string, unknown>;
  response?: unknown;
}
interface PgClient {
  config: Knex.Config;
  acquireConnection(): Promise<PgConnection>;
  _query(connection: PgConnection, obj: QueryObject): Promise<QueryObject>;
}
type ClientClass = new (config: Knex.Config) => PgClient;

const Base = require('knex/lib/dialects/postgres/index.js') as ClientClass;

/** pg's message for its client-side `query_timeout` (knex prefixes the SQL to it). */
const READ_TIMEOUT = /Query read timeout/;

function isReadTimeout(e: unknown): boolean {
  return e instanceof Error && READ_TIMEOUT.test(e.message);
}

/** knex's transaction sends exactly 'ROLLBACK' (savepoints use 'ROLLBACK TO SAVEPOINT …'). */
function isRollback(sql: string | undefined): boolean {
  return sql === 'ROLLBACK';
}

/** The session can no longer be used: the pool must replace it, never hand it out again. */
function dispose(connection: PgConnection, reason: Error): void {
  if (connection.__knex__disposed === undefined) connection.__knex__disposed = reason;
  // With a query in flight pg destroys the socket at once; nothing to wait for.
  connection.end().catch(() => undefined);
}

export interface PgClientOptions {
  /**
   * Send parameterised statements as named prepared statements (default true): each connection
   * parses and plans a statement once instead of on every call (pg's `name` query option). Turn it
   * off behind a pooler that cannot keep prepared statements per client, such as PgBouncer in
   * transaction mode before 1.21 or without `max_prepared_statements`.
   */
  readonly preparedStatements?: boolean;
}

/** One stable name per statement text (the store's statements are constants; values travel as bindings). */
const statementNames = new Map<string, string>();
let statementCount = 0;
function statementName(sql: string): string {
  let name = statementNames.get(sql);
  if (name === undefined) {
    name = `cos_${++statementCount}`;
    statementNames.set(sql, name);
  }
  return name;
}

/**
 * A knex client class for Postgres whose every operation settles within `budgetMs`. The budget is
 * a closure constant: knex builds each transaction's client from the class prototype without
 * calling the constructor.
 */
export function deadlinePgClient(budgetMs: number, options: PgClientOptions = {}): typeof Knex.Client {
  const prepare = options.preparedStatements ?? true;
  class DeadlinePgClient extends Base {
    constructor(config: Knex.Config) {
      super(config);
      // knex keeps its own copy of the config: let it name the stock driver, as with `client: 'pg'`,
      // for code that tells dialects apart by `knex.client.config.client`.
      this.config.client = 'pg';
    }

    override async acquireConnection(): Promise<PgConnection> {
      const started = performance.now();
      const connection = await super.acquireConnection();
      connection[DEADLINE] = started + budgetMs;
      return connection;
    }

    override async _query(connection: PgConnection, obj: QueryObject): Promise<QueryObject> {
      const rollback = isRollback(obj.sql);
      if (rollback && connection.__knex__disposed !== undefined) return obj;
      const deadline = connection[DEADLINE];
      if (deadline === undefined) return super._query(connection, obj);
      const left = Math.floor(deadline - performance.now());
      if (left < 1) {
        const error = new Error(`Query read timeout: the store budget of ${budgetMs} ms was used up before the statement was sent`);
        dispose(connection, error);
        if (rollback) return obj;
        throw error;
      }
      obj.options =
        prepare && obj.sql !== undefined && obj.bindings !== undefined && obj.bindings.length > 0
          ? { ...obj.options, query_timeout: left, name: statementName(obj.sql) }
          : { ...obj.options, query_timeout: left };
      try {
        return await super._query(connection, obj);
      } catch (e) {
        if (!isReadTimeout(e)) throw e;
        dispose(connection, e as Error);
        if (rollback) return obj;
        throw e;
      }
    }
  }
  return DeadlinePgClient as unknown as typeof Knex.Client;
}
