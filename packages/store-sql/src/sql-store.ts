import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { HealthProbe, Logger, Metrics, Stores, UnitOfWork } from '@cos/core';
import knexFactory, { type Knex } from 'knex';
import { parseDatabaseUrl, type ParsedDatabaseUrl, type SqlDialect } from './database-url.js';
import { ErrorTranslator } from './errors.js';
import { deadlinePgClient } from './pg-client.js';
import { cachingSqliteClient } from './sqlite-client.js';
import { PgDirect } from './pg-direct.js';
import { SqliteReadConnection } from './sqlite-reader.js';
import { migratorConfig, pendingMigrationNames } from './migrations.js';
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
   * timeout of a single statement, and for a unit of work the pool wait plus the wait for the write
   * lock (BEGIN IMMEDIATE) together.
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
  readonly knex: Knex;
  readonly stores: Stores;
  readonly unitOfWork: UnitOfWork;
  readonly health: HealthProbe;
  /** Applies pending migrations; returns the names applied (empty when up to date). */
  migrate(): Promise<string[]>;
  /** Names of migrations not applied yet (read-only: creates no bookkeeping table). */
  pendingMigrations(): Promise<string[]>;
  /** Closes the pool (when this store owns it). Idempotent. */
  close(): Promise<void>;
}

export interface SqlStoreFromKnexOptions {
  readonly logger?: Logger;
  readonly metrics?: Pick<Metrics, 'storeError'>;
  /** Destroy the knex instance on close(). Default false: the host service owns its knex. */
  readonly destroyOnClose?: boolean;
}

export const DEFAULT_STATEMENT_TIMEOUT_MS = 2000;
const DEFAULT_POOL_MAX = 10;
const IDLE_IN_TRANSACTION_TIMEOUT_MS = 10_000;
/** tarn never reaps below `min`; this only avoids reaping churn. */
const NEVER_MS = 2 ** 31 - 1;

type SqliteConnection = { pragma(source: string): unknown };

/** A knex message of one kind is logged at most this often (e.g. one per failed acquire while the database is down). */
export const KNEX_LOG_INTERVAL_MS = 10_000;

/**
 * knex's own messages (e.g. "migration failed") go to the Logger port, never to stdout: the CLI's
 * --json output must stay clean. Without a logger they are dropped. Only a message's first line is
 * kept (knex appends stacks), and each kind (the text before its first ':') at most once per 10 s:
 * during a database outage knex warns "Acquire connection error" for every request, which the
 * store's own throttled "SQL store unavailable" already reports (issue 18).
 */
function knexLog(logger: Logger | undefined): Knex.Config['log'] {
  const lastLogged = new Map<string, number>();
  const to =
    (level: 'debug' | 'warn' | 'error') =>
    (message: unknown): void => {
      if (logger === undefined) return;
      const text = typeof message === 'string' ? message : String((message as Error)?.message ?? message);
      const firstLine = text.split('\n', 1)[0] ?? '';
      if (level !== 'debug') {
        const kind = `${level}:${firstLine.split(':', 1)[0]}`;
        const now = Date.now();
        if (now - (lastLogged.get(kind) ?? Number.NEGATIVE_INFINITY) < KNEX_LOG_INTERVAL_MS) return;
        lastLogged.set(kind, now);
      }
      logger[level]({ component: 'knex' }, firstLine);
    };
  return { debug: to('debug'), warn: to('warn'), error: to('error'), deprecate: to('warn') };
}

function sqliteKnexConfig(
  parsed: Extract<ParsedDatabaseUrl, { dialect: 'sqlite' }>,
  timeoutMs: number,
  logger: Logger | undefined,
): Knex.Config {
  return {
    // Prepared-statement cache, and units of work that start with BEGIN IMMEDIATE and wait for
    // another connection's write lock on timers, within the budget (see sqlite-client.ts).
    client: cachingSqliteClient({ budgetMs: timeoutMs }),
    log: knexLog(logger),
    useNullAsDefault: true,
    // A provider knex calls on first connect (lazy): create the file's directory when missing. The
    // `filename` property only tells knex's config check that a file is named.
    connection: Object.assign(
      () => {
        if (!parsed.memory) mkdirSync(dirname(resolve(parsed.filename)), { recursive: true });
        return { filename: parsed.filename };
      },
      { filename: parsed.filename },
    ),
    // One connection: better-sqlite3 is synchronous, so more connections in one process add no
    // parallelism, only waits for the write lock. For ':memory:' it is also the database itself, so
    // it must never be reaped.
    pool: {
      min: 1,
      max: 1,
      idleTimeoutMillis: NEVER_MS,
      afterCreate(conn: SqliteConnection, done: (err: Error | null, conn: SqliteConnection) => void) {
        try {
          if (!parsed.memory) conn.pragma('journal_mode = WAL');
          conn.pragma('foreign_keys = ON');
          conn.pragma(`busy_timeout = ${Math.max(0, Math.floor(timeoutMs))}`);
          done(null, conn);
        } catch (e) {
          done(e as Error, conn);
        }
      },
    },
    acquireConnectionTimeout: timeoutMs,
  };
}

function postgresKnexConfig(
  parsed: Extract<ParsedDatabaseUrl, { dialect: 'postgres' }>,
  options: { timeoutMs: number | null; poolMax: number; schema: string | undefined; logger: Logger | undefined; preparedStatements: boolean },
): Knex.Config {
  const timeouts =
    options.timeoutMs === null
      ? {}
      : {
          connectionTimeoutMillis: options.timeoutMs,
          // Server-side: the backend gives up on a statement (lock waits) and frees its locks.
          statement_timeout: options.timeoutMs,
          // Client-side bound for a server that stops answering (network partition). The client
          // class below narrows it per statement to what is left of the operation's deadline; this
          // connection-level value covers knex's own statements while a connection is set up.
          query_timeout: options.timeoutMs,
          idle_in_transaction_session_timeout: IDLE_IN_TRANSACTION_TIMEOUT_MS,
        };
  return {
    // One deadline per store call and per unit of work, covering the pool wait and every statement;
    // a connection whose statement timed out is evicted, never waited on (C-17). See pg-client.ts.
    client: options.timeoutMs === null ? 'pg' : deadlinePgClient(options.timeoutMs, { preparedStatements: options.preparedStatements }),
    log: knexLog(options.logger),
    connection: {
      connectionString: parsed.connectionString,
      application_name: 'cos',
      keepAlive: true,
      ...timeouts,
    } as Knex.PgConnectionConfig,
    ...(options.schema !== undefined ? { searchPath: [options.schema] } : {}),
    pool: { min: 0, max: options.poolMax, idleTimeoutMillis: 30_000 },
    // The pool wait is part of the operation's budget (the deadline starts before it).
    acquireConnectionTimeout: options.timeoutMs ?? 60_000,
  };
}

function dialectOfKnex(knex: Knex): SqlDialect {
  const name = String((knex.client as { dialect?: unknown }).dialect ?? knex.client.config?.client ?? '');
  if (/^(postgres|postgresql|pg)$/i.test(name)) return 'postgres';
  if (/sqlite/i.test(name)) return 'sqlite';
  throw new Error(`@cos/store-sql supports SQLite and Postgres knex clients, not "${name}"`);
}

interface StoreParts {
  readonly knex: Knex;
  readonly dialect: SqlDialect;
  readonly logger: Logger | undefined;
  readonly metrics?: Pick<Metrics, 'storeError'> | undefined;
  readonly destroyOnClose: boolean;
  /** Knex used for migrations (Postgres from a URL: one without statement timeouts). */
  readonly migrationKnex?: () => Knex;
  /** SQLite files from a URL: the read-only connection of the hot reads (sqlite-reader.ts). */
  readonly reader?: SqliteReadConnection;
  /** Postgres from a URL: single statements outside units of work without knex's query machinery (pg-direct.ts). */
  readonly direct?: PgDirect;
}

function buildStore(parts: StoreParts): SqlStore {
  const { knex, dialect } = parts;
  const errors = new ErrorTranslator(parts.logger, parts.metrics);
  const { reader, direct } = parts;
  const stores = createStores({
    db: knex,
    dialect,
    inTransaction: false,
    errors,
    ...(reader !== undefined ? { reader } : {}),
    ...(direct !== undefined ? { direct } : {}),
  });
  const unitOfWork = new SqlUnitOfWork(knex, dialect, errors);
  const health: HealthProbe = {
    async ping() {
      try {
        await knex.raw('SELECT 1');
      } catch (e) {
        throw errors.translate(e);
      }
    },
  };
  let closing: Promise<void> | null = null;

  return Object.freeze({
    dialect,
    knex,
    stores,
    unitOfWork,
    health,
    async migrate(): Promise<string[]> {
      const db = parts.migrationKnex?.() ?? knex;
      try {
        const [, applied] = (await db.migrate.latest(migratorConfig(dialect))) as [number, string[]];
        return applied;
      } catch (e) {
        throw errors.translate(e);
      } finally {
        if (db !== knex) await db.destroy();
      }
    },
    async pendingMigrations(): Promise<string[]> {
      try {
        return await pendingMigrationNames(knex);
      } catch (e) {
        throw errors.translate(e);
      }
    },
    close(): Promise<void> {
      // The reader first: the pool's connection, closing last, checkpoints the WAL.
      reader?.close();
      closing ??= parts.destroyOnClose ? knex.destroy() : Promise.resolve();
      return closing;
    },
  });
}

/** A store from DATABASE_URL. Connects lazily (on the first query); does not migrate. */
export function createSqlStore(config: SqlStoreConfig): SqlStore {
  const parsed = parseDatabaseUrl(config.databaseUrl);
  const timeoutMs = config.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS;
  if (!(timeoutMs > 0)) throw new Error('statementTimeoutMs must be a positive number of milliseconds');
  if (parsed.dialect === 'sqlite') {
    return buildStore({
      knex: knexFactory(sqliteKnexConfig(parsed, timeoutMs, config.logger)),
      dialect: 'sqlite',
      logger: config.logger,
      metrics: config.metrics,
      destroyOnClose: true,
      // A file only: ':memory:' is a database per connection, so a second connection would see another one.
      ...(parsed.memory ? {} : { reader: new SqliteReadConnection(parsed.filename, Math.max(0, Math.floor(timeoutMs))) }),
    });
  }
  const poolMax = config.poolMax ?? DEFAULT_POOL_MAX;
  if (!Number.isInteger(poolMax) || poolMax < 1) throw new Error('poolMax must be a positive integer');
  const knex = knexFactory(
    postgresKnexConfig(parsed, { timeoutMs, poolMax, schema: config.schema, logger: config.logger, preparedStatements: config.preparedStatements ?? true }),
  );
  const direct = PgDirect.of(knex);
  return buildStore({
    knex,
    ...(direct !== undefined ? { direct } : {}),
    dialect: 'postgres',
    logger: config.logger,
    metrics: config.metrics,
    destroyOnClose: true,
    // DDL may legitimately run longer than one request's statement timeout.
    migrationKnex: () =>
      knexFactory(postgresKnexConfig(parsed, { timeoutMs: null, poolMax: 1, schema: config.schema, logger: config.logger, preparedStatements: false })),
  });
}

/**
 * A store over a host service's own knex (embedding). The host owns the pool (and its timeouts and
 * SQLite pragmas); close() leaves it open unless `destroyOnClose` is set. On SQLite the host's pool
 * should hold one connection (see README).
 */
export function createSqlStoreFromKnex(knex: Knex, options: SqlStoreFromKnexOptions = {}): SqlStore {
  return buildStore({
    knex,
    dialect: dialectOfKnex(knex),
    logger: options.logger,
    metrics: options.metrics,
    destroyOnClose: options.destroyOnClose ?? false,
  });
}
