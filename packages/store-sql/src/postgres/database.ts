/**
 * Postgres from a URL: a `pg.Pool` owned by the store, every store call and every unit of work
 * under ONE deadline (C-17: an answer within the budget even when the network to Postgres is
 * blackholed). Only pg's public API: `pool.connect()`, `client.query({ text, values, name,
 * query_timeout })`, `client.release(err)`, and the documented Pool/Client options.
 *
 *  - The deadline starts when the operation asks the pool for a connection: a single statement, or
 *    a whole unit of work (BEGIN … COMMIT on one checked-out client). The pool wait is raced against
 *    it, and every statement gets pg's client-side `query_timeout` set to the time left, so waiting
 *    for the pool and waiting for the server never add up past the budget.
 *  - A statement the server did not answer in time leaves the connection with a query in flight:
 *    anything sent after it (a ROLLBACK, the next request's statement) would queue behind it. So a
 *    connection that timed out, errored or ended is released with an error, which makes the pool
 *    destroy it (pg closes the socket of a client with a query in flight at once); it is never
 *    handed out again.
 *  - A ROLLBACK is never sent on such a connection: its session is gone or going, so its
 *    transaction can never commit, and Postgres rolls it back when the session ends. The unit of
 *    work rejects with the original error at once.
 *  - Server side: `statement_timeout` (the backend gives a statement up and frees its locks) and
 *    `idle_in_transaction_session_timeout`, set per session by pg at connect.
 *  - Parameterised statements are named prepared statements (parsed and planned once per session)
 *    unless `preparedStatements` is false (poolers that cannot keep them per client).
 */
import { createRequire } from 'node:module';
import type pg from 'pg';
import { parseIntoClientConfig } from 'pg-connection-string';
import type { SqlResult, SqlSession, StatementListeners } from '../context.js';
import { PlaceholderCache, numberedPlaceholders } from './placeholders.js';

export const IDLE_IN_TRANSACTION_TIMEOUT_MS = 10_000;
const IDLE_TIMEOUT_MS = 30_000;

export interface PgDatabaseOptions {
  readonly connectionString: string;
  /** The answer budget of every store call and unit of work, in ms (C-17). */
  readonly budgetMs: number;
  readonly poolMax: number;
  /** The schema to use (search_path), e.g. a per-test-run schema. Default: the server's search_path. */
  readonly schema?: string | undefined;
  readonly preparedStatements: boolean;
  readonly listeners: StatementListeners;
  /** Errors of idle pooled connections (e.g. the server ended the session). */
  readonly onIdleError: (error: Error) => void;
}

/** Thrown when the budget is used up: the messages are those the error translator knows as "unavailable". */
function budgetError(what: string, budgetMs: number): Error {
  return new Error(`${what}: the store budget of ${budgetMs} ms was used up`);
}

/** pg's message for its client-side `query_timeout`. */
function isReadTimeout(e: unknown): boolean {
  return e instanceof Error && /Query read timeout/.test(e.message);
}

/** `-c search_path=<schema>` for libpq's `options`: the identifier quoted, spaces and backslashes escaped. */
function searchPathOption(schema: string): string {
  const identifier = `"${schema.replace(/"/g, '""')}"`;
  return `-c search_path=${identifier.replace(/[\\ ]/g, (c) => `\\${c}`)}`;
}

type Query = pg.QueryConfig & { query_timeout?: number };

const require = createRequire(import.meta.url);
let pgModule: typeof pg | undefined;

/**
 * pg, loaded when the first Postgres database is made rather than with this module: a SQLite
 * deployment's commands (`cos-admin key issue` and the like) never load pg and what pg loads as it
 * starts, Node's fetch among them, which is a sizeable part of such a command's start.
 */
function loadPg(): typeof pg {
  return (pgModule ??= require('pg') as typeof pg);
}

export class PgDatabase {
  private readonly pool: pg.Pool;
  private readonly texts = new PlaceholderCache();
  /** Connections that errored, ended or timed out: released with an error (destroyed), never reused. */
  private readonly broken = new WeakSet<pg.ClientBase>();
  /** Single statements outside a unit of work (each its own deadline). */
  readonly session: SqlSession = { run: (sql, bindings) => this.single(sql, bindings, true) };

  constructor(private readonly options: PgDatabaseOptions) {
    const url = parseIntoClientConfig(options.connectionString);
    const searchPath = options.schema === undefined ? undefined : searchPathOption(options.schema);
    this.pool = new (loadPg().Pool)({
      application_name: 'cos',
      keepAlive: true,
      max: options.poolMax,
      idleTimeoutMillis: IDLE_TIMEOUT_MS,
      // A new connection's attempt is abandoned at the budget (the deadline below also races the wait).
      connectionTimeoutMillis: options.budgetMs,
      statement_timeout: options.budgetMs,
      // Per statement the time left is passed instead; this covers nothing else but is a safe bound.
      query_timeout: options.budgetMs,
      idle_in_transaction_session_timeout: IDLE_IN_TRANSACTION_TIMEOUT_MS,
      // The URL's own parameters win, as with pg's `connectionString`.
      ...url,
      ...(searchPath !== undefined ? { options: url.options ? `${url.options} ${searchPath}` : searchPath } : {}),
    });
    // A checked-out client has no pool listener: without ours its 'error' would be unhandled.
    this.pool.on('connect', (client) => {
      client.on('error', () => this.broken.add(client));
      client.on('end', () => this.broken.add(client));
    });
    // An idle client's error: the pool has already removed it.
    this.pool.on('error', (error) => options.onIdleError(error));
  }

  /** Runs `work` on one connection inside BEGIN … COMMIT, everything within one budget. */
  async transaction<T>(work: (session: SqlSession) => Promise<T>): Promise<T> {
    const deadline = performance.now() + this.options.budgetMs;
    const client = await this.acquire(deadline);
    let failure: unknown = undefined;
    try {
      await this.send(client, 'BEGIN', [], deadline, false);
      const result = await work({ run: (sql, bindings) => this.send(client, sql, bindings, deadline, true) });
      await this.send(client, 'COMMIT', [], deadline, false);
      return result;
    } catch (e) {
      failure = e;
      if (!this.broken.has(client)) {
        try {
          await this.send(client, 'ROLLBACK', [], deadline, false);
        } catch {
          this.broken.add(client);
        }
      }
      throw e;
    } finally {
      this.release(client, failure);
    }
  }

  /** One statement, unnamed (ad-hoc SQL: fixtures, diagnostics), under the same deadline. */
  adHoc(sql: string, bindings: readonly unknown[]): Promise<SqlResult> {
    return this.single(sql, bindings, false);
  }

  close(): Promise<void> {
    return this.pool.end();
  }

  private async single(sql: string, bindings: readonly unknown[], prepare: boolean): Promise<SqlResult> {
    const deadline = performance.now() + this.options.budgetMs;
    const client = await this.acquire(deadline);
    let failure: unknown = undefined;
    try {
      return await this.send(client, sql, bindings, deadline, prepare);
    } catch (e) {
      failure = e;
      throw e;
    } finally {
      this.release(client, failure);
    }
  }

  /** A pooled connection, or a rejection when the deadline comes first (a late connection goes back to the pool). */
  private acquire(deadline: number): Promise<pg.PoolClient> {
    return new Promise((resolve, reject) => {
      let settled = false;
      const timer = setTimeout(
        () => {
          settled = true;
          reject(budgetError('Timeout acquiring a connection', this.options.budgetMs));
        },
        Math.max(0, deadline - performance.now()),
      );
      this.pool.connect().then(
        (client) => {
          if (!settled) {
            settled = true;
            clearTimeout(timer);
            resolve(client);
          } else {
            client.release();
          }
        },
        (error: unknown) => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          reject(error);
        },
      );
    });
  }

  private async send(client: pg.PoolClient, sql: string, bindings: readonly unknown[], deadline: number, prepare: boolean): Promise<SqlResult> {
    const left = Math.floor(deadline - performance.now());
    if (left < 1) {
      // Nothing is in flight, but a unit of work's transaction must not be waited on: dispose of it.
      this.broken.add(client);
      throw budgetError('Query read timeout', this.options.budgetMs);
    }
    let query: Query;
    if (prepare) {
      const { text, name } = this.texts.get(sql);
      query =
        this.options.preparedStatements && bindings.length > 0
          ? { name, text, values: bindings as unknown[], query_timeout: left }
          : { text, values: bindings as unknown[], query_timeout: left };
    } else {
      query = { text: numberedPlaceholders(sql), values: bindings as unknown[], query_timeout: left };
    }
    this.options.listeners.emit(sql, bindings);
    try {
      const result = await client.query(query);
      return { rows: result.rows as Record<string, unknown>[], rowCount: result.rowCount ?? 0 };
    } catch (e) {
      if (isReadTimeout(e)) this.broken.add(client);
      throw e;
    }
  }

  private release(client: pg.PoolClient, failure: unknown): void {
    if (!this.broken.has(client)) {
      client.release();
      return;
    }
    // pg-pool destroys a client released with an error.
    client.release(failure instanceof Error ? failure : new Error('connection disposed'));
  }
}
