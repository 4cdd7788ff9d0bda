import { LogThrottle, type HealthProbe, type Logger, type Metrics, type OuterStores, type Stores, type UnitOfWork } from '@cos/core';
import knexFactory, { type Knex } from 'knex';
import { parseDatabaseUrl, type ParsedDatabaseUrl, type SqlDialect } from './database-url.js';
import { StatementListeners, translated, type SqlResult, type SqlSession, type SqlStatement } from './context.js';
import { ErrorTranslator } from './errors.js';
import { KnexDatabase } from './knex-database.js';
import { migratorConfig, pendingMigrationNames } from './migrations/index.js';
import { IDLE_IN_TRANSACTION_TIMEOUT_MS, PgDatabase } from './postgres/database.js';
import { SqliteDatabase } from './sqlite/database.js';
import { withSqliteReadCache } from './sqlite/read-cache.js';
import { SqliteReadConnection } from './sqlite/reader.js';
import { createStores } from './stores/index.js';
import { SqlUnitOfWork } from './unit-of-work.js';

export interface SqlStoreConfig {
  /** `sqlite:<path>`, `sqlite::memory:` or `postgres://…` (DATABASE_URL). */
  readonly databaseUrl: string;
  /** Postgres pool size (default 10). SQLite always uses one connection. */
  readonly poolMax?: number;
  /**
   * The store's answer budget in ms (default 2000, C-17). Postgres: every store call and every unit
   * of work settles within it (pool wait + connection attempt + statements, enforced client-side
   * even when the network is blackholed), and the server's statement_timeout. SQLite: the busy
   * timeout of a single statement (after its wait in line behind an open unit of work, also within
   * it), and for a unit of work the wait in line plus the wait for the write lock (BEGIN IMMEDIATE)
   * together.
   */
  readonly statementTimeoutMs?: number;
  /** Postgres only: the schema to use (knex searchPath), e.g. a per-test-run schema. Default: the server's search_path. */
  readonly schema?: string;
  /**
   * Postgres only (default true): parameterised statements are named prepared statements, parsed and
   * planned once per connection. Set false behind a pooler that cannot keep them per client
   * (PgBouncer in transaction mode before 1.21, or without `max_prepared_statements`).
   */
  readonly preparedStatements?: boolean;
  readonly logger?: Logger;
  /** Told of every call that failed because the store was unreachable or too slow (default: nobody). */
  readonly metrics?: Pick<Metrics, 'storeError'>;
}

/** A store over one database. Also satisfies StoreHarness from @cos/core/testing. */
export interface SqlStore {
  readonly dialect: SqlDialect;
  /**
   * A knex over the same database, for fixtures, tools and migrations (query builder, schema, raw
   * SQL). On a host's knex it is the host's. On SQLite from a URL it runs on the store's one
   * connection and waits in its line (sqlite/database.ts): never inside a unit of work, and a knex
   * call made inside a unitOfWork.run callback waits for it (and times out). On Postgres from a URL the store's calls
   * run on a pg pool of their own, and this knex (with its own small pool, the same schema and
   * session timeouts, but not the per-call deadline) is created on first use.
   */
  readonly knex: Knex;
  /** Each call its own transaction; credential-affecting writes only through `unitOfWork.changeCredentials`. */
  readonly stores: OuterStores;
  readonly unitOfWork: UnitOfWork;
  readonly health: HealthProbe;
  /**
   * One ad-hoc statement (`?` placeholders) on the store's own connections, under the store's
   * deadline, errors translated like a store call's; resolves to its rows. For diagnostics and
   * tests that must see the store's own sessions (e.g. their settings).
   */
  query<T = Record<string, unknown>>(sql: string, bindings?: readonly unknown[]): Promise<T[]>;
  /**
   * Calls `listener` with each statement the store's methods, units of work and `query` send (SQL
   * as written, with `?` placeholders, and its bindings), right before it is sent; a cached answer
   * sends none. Returns the function that stops it. For tests and diagnostics.
   */
  onStatement(listener: (statement: SqlStatement) => void): () => void;
  /** Applies pending migrations; returns the names applied (empty when up to date). */
  migrate(): Promise<string[]>;
  /** Names of migrations not applied yet (read-only: creates no bookkeeping table). */
  pendingMigrations(): Promise<string[]>;
  /** Closes the store's connections (when it owns them). Idempotent. */
  close(): Promise<void>;
}

export type { SqlStatement };

export interface SqlStoreFromKnexOptions {
  readonly logger?: Logger;
  readonly metrics?: Pick<Metrics, 'storeError'>;
  /** Destroy the knex instance on close(). Default false: the host service owns its knex. */
  readonly destroyOnClose?: boolean;
}

export const DEFAULT_STATEMENT_TIMEOUT_MS = 2000;
const DEFAULT_POOL_MAX = 10;
/** A driver message of one kind is logged at most this often (e.g. one per failed acquire while the database is down). */
const KNEX_LOG_INTERVAL_MS = 10_000;

type LogLine = (message: unknown) => void;

/**
 * Driver messages (knex's "migration failed", a pooled Postgres session the server ended) go to the
 * Logger port, never to stdout: the CLI's --json output must stay clean. Without a logger they are
 * dropped. Only a message's first line is kept (knex appends stacks), and each kind (the text before
 * its first ':') at most once per 10 s: during a database outage a driver may warn for every request,
 * which the store's own throttled "SQL store unavailable" already reports.
 */
function driverLog(logger: Logger | undefined, component: string): { debug: LogLine; warn: LogLine; error: LogLine } {
  const lines = new LogThrottle(KNEX_LOG_INTERVAL_MS, Date.now);
  const to =
    (level: 'debug' | 'warn' | 'error'): LogLine =>
    (message) => {
      if (logger === undefined) return;
      const text = typeof message === 'string' ? message : String((message as Error)?.message ?? message);
      const firstLine = text.split('\n', 1)[0] ?? '';
      if (level !== 'debug') {
        if (lines.pass(`${level}:${firstLine.split(':', 1)[0]}`) === null) return;
      }
      logger[level]({ component }, firstLine);
    };
  return { debug: to('debug'), warn: to('warn'), error: to('error') };
}

function knexLog(logger: Logger | undefined): Knex.Config['log'] {
  const log = driverLog(logger, 'knex');
  return { ...log, deprecate: log.warn };
}

/**
 * The knex of a SQLite store from a URL (migrations, SqlStore.knex): knex's stock better-sqlite3
 * client on the store's own connection, through knex's documented `connectionPool` option (an
 * external, tarn-compatible pool: sqlite/database.ts). knex neither opens nor closes it.
 */
function sqliteKnexConfig(database: SqliteDatabase, logger: Logger | undefined): Knex.Config {
  return {
    client: 'better-sqlite3',
    log: knexLog(logger),
    useNullAsDefault: true,
    connectionPool: database.knexPool,
  };
}

/**
 * The knex of a Postgres store from a URL: migrations (`timeoutMs` null: DDL may run longer than a
 * request's budget) and SqlStore.knex (fixtures, tools). The stock pg client, public options only.
 */
function postgresKnexConfig(
  parsed: Extract<ParsedDatabaseUrl, { dialect: 'postgres' }>,
  options: { timeoutMs: number | null; poolMax: number; schema: string | undefined; logger: Logger | undefined },
): Knex.Config {
  const timeouts =
    options.timeoutMs === null
      ? {}
      : {
          connectionTimeoutMillis: options.timeoutMs,
          statement_timeout: options.timeoutMs,
          query_timeout: options.timeoutMs,
          idle_in_transaction_session_timeout: IDLE_IN_TRANSACTION_TIMEOUT_MS,
        };
  return {
    client: 'pg',
    log: knexLog(options.logger),
    connection: {
      connectionString: parsed.connectionString,
      application_name: 'cos',
      keepAlive: true,
      ...timeouts,
    } as Knex.PgConnectionConfig,
    ...(options.schema !== undefined ? { searchPath: [options.schema] } : {}),
    pool: { min: 0, max: options.poolMax, idleTimeoutMillis: 30_000 },
    acquireConnectionTimeout: options.timeoutMs ?? 60_000,
  };
}

function dialectOfKnex(knex: Knex): SqlDialect {
  const name = String((knex.client as { dialect?: unknown }).dialect ?? knex.client.config?.client ?? '');
  if (/^(postgres|postgresql|pg)$/i.test(name)) return 'postgres';
  if (/sqlite/i.test(name)) return 'sqlite';
  throw new Error(`@cos/store-sql supports SQLite and Postgres knex clients, not "${name}"`);
}

/** Where a store's statements and units of work go (postgres/database.ts, sqlite/database.ts or knex-database.ts). */
interface Database {
  readonly session: SqlSession;
  transaction<T>(work: (session: SqlSession) => Promise<T>): Promise<T>;
  adHoc(sql: string, bindings: readonly unknown[]): Promise<SqlResult>;
}

interface StoreParts {
  readonly dialect: SqlDialect;
  readonly database: Database;
  readonly listeners: StatementListeners;
  /** The knex of SqlStore.knex (created on first use where the store does not run on knex). */
  readonly knex: () => Knex;
  readonly logger: Logger | undefined;
  readonly metrics?: Pick<Metrics, 'storeError'> | undefined;
  /** A knex for migrate(), destroyed after it (Postgres from a URL: one without statement timeouts). */
  readonly migrationKnex?: () => Knex;
  /** SQLite files from a URL: the read cache around the stores (sqlite/read-cache.ts). */
  readonly wrapStores?: (stores: Stores, errors: ErrorTranslator) => Stores;
  /** Closes what the store owns. */
  readonly close: () => Promise<void>;
}

function buildStore(parts: StoreParts): SqlStore {
  const { dialect, database, listeners } = parts;
  const errors = new ErrorTranslator(parts.logger, parts.metrics);
  const stores = createStores({ session: database.session, dialect, inTransaction: false, errors, transaction: (work) => database.transaction(work) });
  const unitOfWork = new SqlUnitOfWork((work) => database.transaction(work), dialect, errors);
  const rowsOf = async (sql: string, bindings: readonly unknown[]): Promise<Array<Record<string, unknown>>> => (await database.adHoc(sql, bindings)).rows;
  const health: HealthProbe = {
    ping: () => translated(errors, () => rowsOf('SELECT 1', [])).then(() => undefined),
  };
  let closing: Promise<void> | null = null;

  return Object.freeze({
    dialect,
    get knex(): Knex {
      return parts.knex();
    },
    stores: parts.wrapStores?.(stores, errors) ?? stores,
    unitOfWork,
    health,
    query<T = Record<string, unknown>>(sql: string, bindings: readonly unknown[] = []): Promise<T[]> {
      return translated(errors, () => rowsOf(sql, bindings)) as Promise<T[]>;
    },
    onStatement(listener: (statement: SqlStatement) => void): () => void {
      return listeners.add(listener);
    },
    async migrate(): Promise<string[]> {
      const db = parts.migrationKnex?.() ?? parts.knex();
      try {
        const [, applied] = (await db.migrate.latest(migratorConfig(dialect))) as [number, string[]];
        return applied;
      } catch (e) {
        throw errors.translate(e);
      } finally {
        if (parts.migrationKnex !== undefined) await db.destroy();
      }
    },
    pendingMigrations(): Promise<string[]> {
      return translated(errors, () => pendingMigrationNames(dialect, rowsOf));
    },
    close(): Promise<void> {
      closing ??= parts.close();
      return closing;
    },
  });
}

/** A store from DATABASE_URL. Connects lazily (on the first query); does not migrate. */
export function createSqlStore(config: SqlStoreConfig): SqlStore {
  const parsed = parseDatabaseUrl(config.databaseUrl);
  const timeoutMs = config.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS;
  if (!(timeoutMs > 0)) throw new Error('statementTimeoutMs must be a positive number of milliseconds');
  const listeners = new StatementListeners();
  if (parsed.dialect === 'sqlite') {
    const database = new SqliteDatabase({ filename: parsed.filename, memory: parsed.memory, budgetMs: timeoutMs, listeners });
    let knex: Knex | null = null;
    // A file only: ':memory:' is a database per connection, so a second connection would see another one.
    const reader = parsed.memory ? undefined : new SqliteReadConnection(parsed.filename, Math.max(0, Math.floor(timeoutMs)));
    return buildStore({
      dialect: 'sqlite',
      database,
      listeners,
      knex: () => (knex ??= knexFactory(sqliteKnexConfig(database, config.logger))),
      logger: config.logger,
      metrics: config.metrics,
      ...(reader !== undefined ? { wrapStores: (stores, errors) => withSqliteReadCache(stores, reader, errors) } : {}),
      close: async () => {
        // The reader first: the store's connection, closing last, checkpoints the WAL.
        reader?.close();
        await knex?.destroy();
        await database.close();
      },
    });
  }
  const poolMax = config.poolMax ?? DEFAULT_POOL_MAX;
  if (!Number.isInteger(poolMax) || poolMax < 1) throw new Error('poolMax must be a positive integer');
  const idleLog = driverLog(config.logger, 'pg');
  const database = new PgDatabase({
    connectionString: parsed.connectionString,
    budgetMs: timeoutMs,
    poolMax,
    schema: config.schema,
    preparedStatements: config.preparedStatements ?? true,
    listeners,
    onIdleError: (error) => idleLog.warn(error),
  });
  let knex: Knex | null = null;
  return buildStore({
    dialect: 'postgres',
    database,
    listeners,
    knex: () => (knex ??= knexFactory(postgresKnexConfig(parsed, { timeoutMs, poolMax, schema: config.schema, logger: config.logger }))),
    logger: config.logger,
    metrics: config.metrics,
    // DDL may legitimately run longer than one request's statement timeout.
    migrationKnex: () => knexFactory(postgresKnexConfig(parsed, { timeoutMs: null, poolMax: 1, schema: config.schema, logger: config.logger })),
    close: async () => {
      await Promise.all([database.close(), knex?.destroy()]);
    },
  });
}

/**
 * A store over a host service's own knex (embedding), through knex's public `raw` and `transaction`.
 * The host owns the pool (and its timeouts and SQLite pragmas); close() leaves it open unless
 * `destroyOnClose` is set. On SQLite the host's pool should hold one connection (see README).
 */
export function createSqlStoreFromKnex(knex: Knex, options: SqlStoreFromKnexOptions = {}): SqlStore {
  const listeners = new StatementListeners();
  return buildStore({
    dialect: dialectOfKnex(knex),
    database: new KnexDatabase(knex, listeners),
    listeners,
    knex: () => knex,
    logger: options.logger,
    metrics: options.metrics,
    close: () => (options.destroyOnClose === true ? knex.destroy() : Promise.resolve()),
  });
}
