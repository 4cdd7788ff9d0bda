/**
 * knex's better-sqlite3 client with a per-connection prepared-statement cache. Stock knex prepares
 * every statement on every call; our statements come from a small fixed set of SQL strings, so
 * reusing them takes SQLite's parse/plan step off the request path. Plugged in through knex's
 * documented `client: <class>` option; only `_query` changes, the pool and transactions are knex's.
 * (SQLite re-prepares a cached statement by itself when the schema changes.)
 */
import { createRequire } from 'node:module';
import type { Knex } from 'knex';

const require = createRequire(import.meta.url);

interface Statement {
  readonly reader: boolean;
  all(bindings: unknown[]): unknown[];
  run(bindings: unknown[]): { changes: number; lastInsertRowid: number | bigint };
}
interface Connection {
  prepare(sql: string): Statement;
}
interface QueryObject {
  sql?: string;
  bindings?: unknown[];
  options?: { safeIntegers?: unknown };
  response?: unknown;
  context?: unknown;
}
interface BetterSqliteClient {
  _query(connection: Connection, obj: QueryObject): Promise<QueryObject>;
  _formatBindings(bindings: unknown[] | undefined): unknown[];
}
type ClientClass = new (config: Knex.Config) => BetterSqliteClient;

/** Enough for every statement shape of the stores with room for ad-hoc SQL; cleared when full. */
const MAX_CACHED_STATEMENTS = 256;

const Base = require('knex/lib/dialects/better-sqlite3/index.js') as ClientClass;
const caches = new WeakMap<Connection, Map<string, Statement>>();

function statementFor(connection: Connection, sql: string): Statement {
  let cache = caches.get(connection);
  if (cache === undefined) {
    cache = new Map();
    caches.set(connection, cache);
  }
  let statement = cache.get(sql);
  if (statement === undefined) {
    statement = connection.prepare(sql);
    if (cache.size >= MAX_CACHED_STATEMENTS) cache.clear();
    cache.set(sql, statement);
  }
  return statement;
}

class CachingBetterSqliteClient extends Base {
  override async _query(connection: Connection, obj: QueryObject): Promise<QueryObject> {
    // Per-query driver options (safeIntegers) stay on knex's own path.
    if (!obj.sql || !connection || obj.options?.safeIntegers !== undefined) return super._query(connection, obj);
    const statement = statementFor(connection, obj.sql);
    const bindings = this._formatBindings(obj.bindings);
    if (statement.reader) {
      obj.response = statement.all(bindings);
      return obj;
    }
    const response = statement.run(bindings);
    obj.response = response;
    obj.context = { lastID: response.lastInsertRowid, changes: response.changes };
    return obj;
  }
}

export const CachingSqliteClient = CachingBetterSqliteClient as unknown as typeof Knex.Client;
