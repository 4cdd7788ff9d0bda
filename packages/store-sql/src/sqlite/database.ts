/**
 * SQLite from a URL (`sqlite:<path>`, `sqlite::memory:`): ONE better-sqlite3 connection owned by the
 * store, used through better-sqlite3's public API only (`new Database(filename)`, `db.pragma()`,
 * `db.prepare()`, `stmt.reader`, `stmt.all()`/`stmt.run()`, `db.inTransaction`, `db.close()`).
 * Parallel to postgres/database.ts.
 *
 *  - One line (a FIFO lock) in front of the connection. A unit of work holds it from its BEGIN to its
 *    COMMIT/ROLLBACK; a single statement outside one takes it for that statement. better-sqlite3 is
 *    synchronous, so more connections in one process would add no parallelism, only waits for the
 *    write lock; for ':memory:' the connection is also the database itself.
 *  - knex (migrations, SqlStore.knex) runs on the same connection through knex's documented
 *    `connectionPool` option (knex ≥ 3.3): `knexPool` is a tarn-compatible pool whose one resource is
 *    this connection, handed out through the same line. So a knex statement never slips into a unit
 *    of work's transaction nor a unit of work into a knex transaction (a migration): each waits for
 *    the other, as on the former knex pool of one.
 *  - A per-connection prepared-statement cache: the stores' SQL is a small fixed set of texts, so
 *    reusing statements takes SQLite's parse/plan step off the request path. SQLite re-prepares a
 *    cached statement by itself when the schema changes.
 *  - Units of work start with `BEGIN IMMEDIATE`, not a deferred `BEGIN` (C-17). Other processes
 *    (`cos-admin key issue` next to `cos-admin serve`) and other stores may hold connections to the
 *    same file. A deferred transaction that reads first and writes later must upgrade its read lock,
 *    and SQLite cannot wait for that: when another connection holds the write lock or has committed
 *    since the read (SQLITE_BUSY / SQLITE_BUSY_SNAPSHOT in WAL mode) it fails at once, busy_timeout
 *    or not; the unit of work would answer 503 although nothing is wrong. `BEGIN IMMEDIATE` takes the
 *    write lock before the first statement, so the lock is the only thing to wait for and a started
 *    unit of work never meets SQLITE_BUSY again.
 *  - That wait does not block the event loop: SQLite's own busy handler sleeps inside the
 *    synchronous better-sqlite3 call, which would stall every other request of the process, and
 *    deadlock against a transaction of another store in the same process (its holder could never
 *    run to COMMIT). So each `BEGIN IMMEDIATE` attempt runs with busy_timeout 0 and is retried on
 *    SQLITE_BUSY after timers with SQLite's own back-off steps, until the unit of work's budget is
 *    used up; then the SQLITE_BUSY becomes the core's UnavailableError. The budget counts from
 *    `transaction()`, the wait in the line included.
 *  - busy_timeout 0 then stays for the rest of the unit of work and for the next ones (a PRAGMA is a
 *    statement: two per unit of work otherwise): once BEGIN IMMEDIATE holds the write lock of the WAL
 *    database, no statement of the transaction waits for a lock. The budget's busy_timeout is set
 *    again before the connection serves anything else: a single statement, or knex.
 *  - Single statements wait in the line up to the budget, then synchronously up to the connection's
 *    busy_timeout (the budget) for another process's lock, as before.
 */
import { mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { SqlResult, SqlSession, StatementListeners } from '../context.js';

const require = createRequire(import.meta.url);

interface Statement {
  readonly reader: boolean;
  all(...bindings: unknown[]): unknown[];
  run(...bindings: unknown[]): { changes: number };
}
/** The part of better-sqlite3's Database this module uses (its public API). */
export interface SqliteConnection {
  readonly inTransaction: boolean;
  prepare(sql: string): Statement;
  pragma(source: string): unknown;
  close(): void;
}
type DatabaseClass = new (filename: string) => SqliteConnection;

/** Enough for every statement shape of the stores with room for ad-hoc SQL; cleared when full. */
const MAX_CACHED_STATEMENTS = 256;

/** The sleeps of SQLite's default busy handler (sqliteDefaultBusyCallback), in ms; the last repeats. */
const BUSY_BACKOFF_MS = [1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100] as const;

/** SQLITE_BUSY and its extended codes (_SNAPSHOT, _RECOVERY, _TIMEOUT): another connection holds a lock. */
function isBusy(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.startsWith('SQLITE_BUSY');
}

/**
 * What knex's better-sqlite3 client did to bindings before handing them over: better-sqlite3 binds
 * numbers, bigints, strings, buffers and null only. The stores pass booleans (`is_system`) and never
 * Dates (they pass epoch ms), but ad-hoc SQL may.
 */
function driverBindings(bindings: readonly unknown[]): unknown[] {
  const out = new Array<unknown>(bindings.length);
  for (let i = 0; i < bindings.length; i += 1) {
    const b = bindings[i];
    out[i] = typeof b === 'boolean' ? Number(b) : b instanceof Date ? b.valueOf() : b;
  }
  return out;
}

/** The messages are those the error translator knows as "unavailable" (errors.ts). */
function waitError(budgetMs: number): Error {
  return new Error(`Timeout acquiring a connection: the store budget of ${budgetMs} ms was used up`);
}
function closedError(): Error {
  return new Error('Unable to acquire a connection: the store is closed');
}

interface Waiter {
  readonly resolve: (connection: SqliteConnection) => void;
  readonly reject: (error: Error) => void;
  timer: NodeJS.Timeout | undefined;
}

/**
 * The tarn-compatible pool handed to knex's `connectionPool` (the shape knex's types call
 * TarnPoolLike, plus the counters knex checks to recognise one). Its one resource is the store's
 * connection; `acquire` waits in the store's line with the store's budget.
 */
export interface SqliteKnexPool {
  readonly min: 1;
  readonly max: 1;
  acquire(): { promise: Promise<SqliteConnection> };
  release(connection: SqliteConnection): boolean;
  /** knex never calls it for an external pool; the store closes the connection (SqliteDatabase.close). */
  destroy(): Promise<void>;
  numUsed(): number;
  numFree(): number;
  numPendingAcquires(): number;
  numPendingCreates(): number;
}

export interface SqliteDatabaseOptions {
  /** better-sqlite3's filename: a path, or ':memory:'. */
  readonly filename: string;
  readonly memory: boolean;
  /** The store's answer budget in ms (C-17): busy_timeout, and the wait in line plus for the write lock of a unit of work. */
  readonly budgetMs: number;
  readonly listeners: StatementListeners;
}

export class SqliteDatabase {
  private connection: SqliteConnection | null = null;
  private readonly statements = new Map<string, Statement>();
  /** True while a unit of work, a single statement or knex holds the connection. */
  private held = false;
  private readonly waiters: Waiter[] = [];
  private closed = false;
  private onIdle: (() => void) | null = null;
  private readonly busyTimeoutMs: number;
  /** The connection's busy_timeout is 0 (units of work), not busyTimeoutMs (everything else). */
  private busyTimeoutZero = false;

  /** Single statements outside a unit of work. */
  readonly session: SqlSession = { run: (sql, bindings) => this.single(sql, bindings) };
  readonly knexPool: SqliteKnexPool;

  constructor(private readonly options: SqliteDatabaseOptions) {
    this.busyTimeoutMs = Math.max(0, Math.floor(options.budgetMs));
    const self = this;
    this.knexPool = {
      min: 1,
      max: 1,
      acquire: () => ({
        promise: self.acquire(performance.now() + options.budgetMs).then((connection) => {
          try {
            return self.withBudgetTimeout(connection);
          } catch (e) {
            self.release();
            throw e;
          }
        }),
      }),
      release(connection) {
        if (connection !== self.connection || !self.held) return false;
        self.release();
        return true;
      },
      destroy: () => Promise.resolve(),
      numUsed: () => (self.held ? 1 : 0),
      numFree: () => (self.connection !== null && !self.held ? 1 : 0),
      numPendingAcquires: () => self.waiters.length,
      numPendingCreates: () => 0,
    };
  }

  /** Runs `work` inside BEGIN IMMEDIATE … COMMIT on the connection; the wait in line and for the write lock within one budget. */
  async transaction<T>(work: (session: SqlSession) => Promise<T>): Promise<T> {
    const deadline = performance.now() + this.options.budgetMs;
    const connection = await this.acquire(deadline);
    let active = true;
    try {
      await this.beginImmediate(connection, deadline);
      let result: T;
      try {
        result = await work({
          run: (sql, bindings) => {
            if (!active) return Promise.reject(new Error('This unit of work has ended; use the stores passed to the current one'));
            try {
              return Promise.resolve(this.send(connection, sql, bindings));
            } catch (e) {
              return Promise.reject(e);
            }
          },
        });
        active = false;
        this.send(connection, 'COMMIT', []);
      } catch (e) {
        active = false;
        // A failed statement may have ended the transaction already (SQLite rolls back on some errors).
        if (connection.inTransaction) {
          try {
            this.send(connection, 'ROLLBACK', []);
          } catch {
            // The original error is the one to report.
          }
        }
        throw e;
      }
      return result;
    } finally {
      active = false;
      this.release();
    }
  }

  /** One statement (ad-hoc SQL: fixtures, diagnostics), as a single statement. */
  adHoc(sql: string, bindings: readonly unknown[]): Promise<SqlResult> {
    return this.single(sql, bindings);
  }

  /** Refuses new work, waits for the holder (a unit of work, knex) to finish, then closes the connection. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const waiter of this.waiters.splice(0)) {
      clearTimeout(waiter.timer);
      waiter.reject(closedError());
    }
    if (this.held) await new Promise<void>((resolve) => (this.onIdle = resolve));
    this.statements.clear();
    const connection = this.connection;
    this.connection = null;
    connection?.close();
  }

  private single(sql: string, bindings: readonly unknown[]): Promise<SqlResult> {
    // Fast path: the connection is open and free; the statement runs synchronously, so nobody can
    // observe it held.
    const connection = this.connection;
    if (connection !== null && !this.held && !this.closed) {
      try {
        return Promise.resolve(this.send(this.withBudgetTimeout(connection), sql, bindings));
      } catch (e) {
        return Promise.reject(e);
      }
    }
    return this.acquire(performance.now() + this.options.budgetMs).then((held) => {
      try {
        return this.send(this.withBudgetTimeout(held), sql, bindings);
      } finally {
        this.release();
      }
    });
  }

  private send(connection: SqliteConnection, sql: string, bindings: readonly unknown[]): SqlResult {
    this.options.listeners.emit(sql, bindings);
    return this.exec(connection, sql, bindings);
  }

  private exec(connection: SqliteConnection, sql: string, bindings: readonly unknown[]): SqlResult {
    const statement = this.statementFor(connection, sql);
    const values = bindings.length === 0 ? bindings : driverBindings(bindings);
    if (statement.reader) {
      const rows = statement.all(...values) as Record<string, unknown>[];
      return { rows, rowCount: rows.length };
    }
    return { rows: [], rowCount: statement.run(...values).changes };
  }

  private statementFor(connection: SqliteConnection, sql: string): Statement {
    let statement = this.statements.get(sql);
    if (statement === undefined) {
      statement = connection.prepare(sql);
      if (this.statements.size >= MAX_CACHED_STATEMENTS) this.statements.clear();
      this.statements.set(sql, statement);
    }
    return statement;
  }

  /**
   * `BEGIN IMMEDIATE`, waiting for the write lock on timers until `deadline` (performance.now()). A
   * `BEGIN IMMEDIATE` that fails with SQLITE_BUSY starts no transaction, so it can simply be
   * repeated. Reported to onStatement listeners once, like the Postgres session's BEGIN.
   */
  private async beginImmediate(connection: SqliteConnection, deadline: number): Promise<void> {
    this.options.listeners.emit('BEGIN IMMEDIATE', []);
    for (let attempt = 0; ; attempt += 1) {
      try {
        if (!this.busyTimeoutZero) {
          this.exec(connection, 'PRAGMA busy_timeout = 0', []);
          this.busyTimeoutZero = true;
        }
        this.exec(connection, 'BEGIN IMMEDIATE', []);
        return;
      } catch (e) {
        const left = deadline - performance.now();
        if (!isBusy(e) || left <= 0) throw e;
        await sleep(Math.min(BUSY_BACKOFF_MS[Math.min(attempt, BUSY_BACKOFF_MS.length - 1)]!, Math.ceil(left)));
      }
    }
  }

  /** The connection with the budget's busy_timeout (held by the caller, outside a unit of work). */
  private withBudgetTimeout(connection: SqliteConnection): SqliteConnection {
    if (this.busyTimeoutZero) {
      this.exec(connection, `PRAGMA busy_timeout = ${this.busyTimeoutMs}`, []);
      this.busyTimeoutZero = false;
    }
    return connection;
  }

  /** The connection, once it is this caller's turn (FIFO), or a rejection at `deadline`. Opens it on first use. */
  private acquire(deadline: number): Promise<SqliteConnection> {
    if (this.closed) return Promise.reject(closedError());
    if (!this.held && this.waiters.length === 0) {
      try {
        const connection = this.open();
        this.held = true;
        return Promise.resolve(connection);
      } catch (e) {
        return Promise.reject(e);
      }
    }
    return new Promise<SqliteConnection>((resolve, reject) => {
      const waiter: Waiter = { resolve, reject, timer: undefined };
      waiter.timer = setTimeout(
        () => {
          const at = this.waiters.indexOf(waiter);
          if (at !== -1) this.waiters.splice(at, 1);
          reject(waitError(this.options.budgetMs));
        },
        Math.max(0, deadline - performance.now()),
      );
      this.waiters.push(waiter);
    });
  }

  /** Hands the connection to the next in line, or frees it. */
  private release(): void {
    const next = this.waiters.shift();
    if (next === undefined) {
      this.held = false;
      const idle = this.onIdle;
      this.onIdle = null;
      idle?.();
      return;
    }
    clearTimeout(next.timer);
    try {
      next.resolve(this.open());
    } catch (e) {
      // Cannot happen once open (the connection is kept); keep the line moving anyway.
      next.reject(e as Error);
      this.release();
    }
  }

  /** The connection, opened on first use: the file's directory created, the pragmas set. */
  private open(): SqliteConnection {
    if (this.connection !== null) return this.connection;
    const { filename, memory } = this.options;
    if (!memory) mkdirSync(dirname(resolve(filename)), { recursive: true });
    const Database = require('better-sqlite3') as DatabaseClass;
    const connection = new Database(filename);
    try {
      if (!memory) connection.pragma('journal_mode = WAL');
      connection.pragma('foreign_keys = ON');
      connection.pragma(`busy_timeout = ${this.busyTimeoutMs}`);
    } catch (e) {
      connection.close();
      throw e;
    }
    this.connection = connection;
    this.busyTimeoutZero = false;
    return connection;
  }
}
