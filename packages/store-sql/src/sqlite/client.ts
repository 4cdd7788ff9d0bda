/**
 * knex's better-sqlite3 client, plugged in through knex's documented `client: <class>` option, with
 * two changes; the pool, the query builder and knex's transaction bookkeeping stay knex's. Both build
 * on knex internals (its dialect class, `_query`, `_formatBindings`, the transaction class), checked
 * by assertCompatibleKnex at start-up and by test/sqlite-client.test.ts.
 *
 *  - A per-connection prepared-statement cache. Stock knex prepares every statement on every call;
 *    our statements come from a small fixed set of SQL strings, so reusing them takes SQLite's
 *    parse/plan step off the request path (`_query`). SQLite re-prepares a cached statement by itself
 *    when the schema changes.
 *  - Transactions start with `BEGIN IMMEDIATE` instead of knex's deferred `BEGIN` (C-17). Other
 *    processes (`cos-admin key issue` next to `cos-admin serve`) and other stores may hold
 *    connections to the same file. A deferred transaction that reads first and writes later must
 *    upgrade its read lock, and SQLite cannot wait for that: when another connection holds the write
 *    lock or has committed since the read (SQLITE_BUSY / SQLITE_BUSY_SNAPSHOT in WAL mode) it fails
 *    at once, busy_timeout or not; the unit of work would answer 503 although nothing is wrong.
 *    `BEGIN IMMEDIATE` takes the write lock before the first statement, so the lock is the only thing
 *    to wait for and a started unit of work never meets SQLITE_BUSY again.
 *    The wait for it does not block the event loop: SQLite's own busy handler sleeps inside the
 *    synchronous better-sqlite3 call, which would stall every other request of the process, and
 *    deadlock against a transaction of another store in the same process (its holder could never
 *    run to COMMIT). So `BEGIN IMMEDIATE` runs with busy_timeout 0 and is retried on SQLITE_BUSY
 *    after timers with SQLite's own back-off steps, until the unit of work's budget (counted from
 *    `knex.transaction()`, the pool wait included) is used up; then the SQLITE_BUSY becomes the
 *    core's UnavailableError. Single statements outside a unit of work are unchanged: they wait
 *    synchronously up to the connection's busy_timeout, like before.
 */
import { createRequire } from 'node:module';
import { setTimeout as sleep } from 'node:timers/promises';
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
interface SqliteTransaction {
  readonly client: { readonly transacting?: boolean };
  begin(connection: Connection): Promise<unknown>;
}
type TransactionClass = new (client: unknown, ...rest: unknown[]) => SqliteTransaction;

/** Enough for every statement shape of the stores with room for ad-hoc SQL; cleared when full. */
const MAX_CACHED_STATEMENTS = 256;

/** The sleeps of SQLite's default busy handler (sqliteDefaultBusyCallback), in ms; the last repeats. */
const BUSY_BACKOFF_MS = [1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100] as const;

const Base = require('knex/lib/dialects/better-sqlite3/index.js') as ClientClass;
const BaseTransaction = require('knex/lib/dialects/sqlite3/execution/sqlite-transaction.js') as TransactionClass;

/**
 * The knex internals this file builds on are not knex's documented API (the documented part is the
 * `client: <class>` option). A knex that changed them must fail loudly at start-up, not turn into a
 * silent slowdown (no statement cache) or a deferred BEGIN (SQLITE_BUSY under contention): checked
 * once, when the client class is made; test/sqlite-client.test.ts checks the behaviour itself.
 */
function assertCompatibleKnex(): void {
  const missing = [
    ['better-sqlite3 client _query', (Base.prototype as Partial<BetterSqliteClient>)._query],
    ['better-sqlite3 client _formatBindings', (Base.prototype as Partial<BetterSqliteClient>)._formatBindings],
    ['client transaction', (Base.prototype as { transaction?: unknown }).transaction],
    ['sqlite transaction begin', (BaseTransaction.prototype as Partial<SqliteTransaction>).begin],
  ].filter(([, member]) => typeof member !== 'function');
  if (missing.length > 0) {
    throw new Error(`@cos/store-sql: this knex version is not supported (its SQLite client lacks ${missing.map(([name]) => String(name)).join(', ')})`);
  }
}
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

/** SQLITE_BUSY and its extended codes (_SNAPSHOT, _RECOVERY, _TIMEOUT): another connection holds a lock. */
function isBusy(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.startsWith('SQLITE_BUSY');
}

function setBusyTimeout(connection: Connection, ms: number): void {
  statementFor(connection, `PRAGMA busy_timeout = ${ms}`).all([]);
}

/**
 * `BEGIN IMMEDIATE`, waiting for the write lock on timers until `deadline` (performance.now()). A
 * `BEGIN IMMEDIATE` that fails with SQLITE_BUSY starts no transaction, so it can simply be repeated.
 */
async function beginImmediate(connection: Connection, deadline: number, busyTimeoutMs: number): Promise<void> {
  const begin = statementFor(connection, 'BEGIN IMMEDIATE');
  setBusyTimeout(connection, 0);
  try {
    for (let attempt = 0; ; attempt += 1) {
      try {
        begin.run([]);
        return;
      } catch (e) {
        const left = deadline - performance.now();
        if (!isBusy(e) || left <= 0) throw e;
        await sleep(Math.min(BUSY_BACKOFF_MS[Math.min(attempt, BUSY_BACKOFF_MS.length - 1)]!, Math.ceil(left)));
      }
    }
  } finally {
    setBusyTimeout(connection, busyTimeoutMs);
  }
}

export interface SqliteClientOptions {
  /**
   * The store's answer budget in ms (C-17): the connection's busy_timeout (set by the pool's
   * afterCreate, restored here after each BEGIN IMMEDIATE), and how long a unit of work may wait for
   * the pool and the write lock together.
   */
  readonly budgetMs: number;
}

/**
 * The knex client class for SQLite files and ':memory:'. The options are closure constants: knex
 * builds each transaction's client from the class prototype without calling the constructor.
 */
export function cachingSqliteClient(options: SqliteClientOptions): typeof Knex.Client {
  assertCompatibleKnex();
  const busyTimeoutMs = Math.max(0, Math.floor(options.budgetMs));

  class ImmediateTransaction extends BaseTransaction {
    /** Before the pool wait: knex.transaction() constructs the transaction, then acquires. */
    private readonly deadline = performance.now() + options.budgetMs;

    override begin(connection: Connection): Promise<unknown> {
      return beginImmediate(connection, this.deadline, busyTimeoutMs);
    }
  }

  class CachingBetterSqliteClient extends Base {
    /** As knex's sqlite3 client (`new Transaction_Sqlite(this, ...arguments)`), with BEGIN IMMEDIATE. */
    transaction(...args: unknown[]): SqliteTransaction {
      return new ImmediateTransaction(this, ...args);
    }

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
  return CachingBetterSqliteClient as unknown as typeof Knex.Client;
}
