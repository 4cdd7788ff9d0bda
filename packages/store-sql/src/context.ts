import { assertCredentialChangeDeclared } from '@cos/core';
import type { SqlDialect } from './database-url.js';
import type { ErrorTranslator } from './errors.js';

type Row = Record<string, unknown>;

/** What one statement answers: its rows (empty for a write without RETURNING) and its affected row count. */
export interface SqlResult {
  readonly rows: Row[];
  readonly rowCount: number;
}

/**
 * Where a store's statements go: the store's pool outside a unit of work, or the unit of work's one
 * connection. Chosen once, when the context is made (postgres/database.ts on Postgres from a URL,
 * knex-database.ts on SQLite and a host's knex). SQL is written with `?` placeholders.
 */
export interface SqlSession {
  run(sql: string, bindings: readonly unknown[]): Promise<SqlResult>;
}

/** What every store needs: where its statements go, the dialect and the error translator. */
export interface StoreContext {
  readonly session: SqlSession;
  readonly dialect: SqlDialect;
  /** True when `session` is a unit of work's transaction. */
  readonly inTransaction: boolean;
  /**
   * In a unit of work, the organisations it changes credentials of
   * (`UnitOfWork.changeCredentials(organisationIds, work)`; none in `run`): a credential-affecting
   * write of any other organisation throws UndeclaredCredentialChangeError before its statement is sent.
   */
  readonly credentialChanges?: ReadonlySet<string>;
  readonly errors: ErrorTranslator;
  /**
   * Outside a unit of work: runs `work` in a transaction of its own on one connection, for a store
   * method whose statements must be atomic together (the outbox's claim, the audit chain's head read
   * and append). Absent inside a unit of work.
   */
  readonly transaction?: <T>(work: (session: SqlSession) => Promise<T>) => Promise<T>;
}

/** One statement a store method sent (`?` placeholders, as written), for SqlStore.onStatement. */
export interface SqlStatement {
  readonly sql: string;
  readonly bindings: readonly unknown[];
}

/** The SqlStore.onStatement listeners; told of each statement right before it is sent. */
export class StatementListeners {
  private readonly listeners = new Set<(statement: SqlStatement) => void>();

  add(listener: (statement: SqlStatement) => void): () => void {
    const own = (statement: SqlStatement): void => listener(statement);
    this.listeners.add(own);
    return () => void this.listeners.delete(own);
  }

  emit(sql: string, bindings: readonly unknown[]): void {
    if (this.listeners.size === 0) return;
    for (const listener of this.listeners) listener({ sql, bindings });
  }
}

/**
 * Runs `call`, handing any failure to the error translator, which turns driver errors into the
 * core's errors (ConflictError, NotFoundError, UnavailableError).
 */
export async function translated<T>(errors: ErrorTranslator, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (e) {
    throw errors.translate(e);
  }
}

/** Rows of a SELECT (or of a write with RETURNING); errors translated. */
export async function query<T = Row>(ctx: StoreContext, sql: string, bindings: readonly unknown[]): Promise<T[]> {
  try {
    return (await ctx.session.run(sql, bindings)).rows as T[];
  } catch (e) {
    throw ctx.errors.translate(e);
  }
}

/** Affected row count of an INSERT/UPDATE/DELETE; errors translated. */
export async function execute(ctx: StoreContext, sql: string, bindings: readonly unknown[]): Promise<number> {
  try {
    return (await ctx.session.run(sql, bindings)).rowCount;
  } catch (e) {
    throw ctx.errors.translate(e);
  }
}

/** Epoch milliseconds (Postgres returns bigint as a string, SQLite as a number). */
export function toDate(value: unknown): Date {
  return new Date(Number(value));
}

export function toDateOrNull(value: unknown): Date | null {
  return value === null || value === undefined ? null : new Date(Number(value));
}

export function msOrNull(date: Date | null): number | null {
  return date === null ? null : date.getTime();
}

/** Postgres returns booleans, SQLite 0/1. */
export function toBool(value: unknown): boolean {
  return value === true || value === 1 || value === '1' || value === 't' || value === 1n;
}

export function stringOrNull(value: unknown): string | null {
  return value === null || value === undefined ? null : String(value);
}

/** An integer column that may be NULL (Postgres may answer a number or a string). */
export function numberOrNull(value: unknown): number | null {
  return value === null || value === undefined ? null : Number(value);
}

/** The credential-write guard: inside a unit of work, `organisationId` must have been declared. */
export function credentialWrite(ctx: StoreContext, organisationId: string, write: string): void {
  if (ctx.inTransaction) assertCredentialChangeDeclared(ctx.credentialChanges ?? NO_ORGANISATIONS, organisationId, write);
}

const NO_ORGANISATIONS: ReadonlySet<string> = new Set();
