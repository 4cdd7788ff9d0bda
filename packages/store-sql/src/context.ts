import type { Knex } from 'knex';
import type { SqlDialect } from './database-url.js';
import type { ErrorTranslator } from './errors.js';
import type { PgDirect } from './pg-direct.js';
import type { SqliteReadConnection } from './sqlite-reader.js';

/** What every store needs: the connection (knex or a transaction), the dialect and the error translator. */
export interface StoreContext {
  readonly db: Knex;
  readonly dialect: SqlDialect;
  /** True when `db` is a transaction opened by the unit of work. */
  readonly inTransaction: boolean;
  readonly errors: ErrorTranslator;
  /**
   * SQLite files only, never inside a unit of work: the read-only connection that serves the hot
   * single-statement reads (sqlite-reader.ts). Absent on ':memory:', Postgres and a host's knex.
   */
  readonly reader?: SqliteReadConnection;
  /**
   * Postgres from a URL only, never inside a unit of work: single statements straight through the
   * pool and the pg client (pg-direct.ts). Absent on SQLite and a host's knex.
   */
  readonly direct?: PgDirect;
}

type Row = Record<string, unknown>;

/** Rows of a `knex.raw` SELECT (Postgres answers `{rows}`, SQLite an array). */
export async function query<T = Row>(ctx: StoreContext, sql: string, bindings: readonly unknown[]): Promise<T[]> {
  if (ctx.direct !== undefined) return (await ctx.direct.run(sql, bindings)).rows as T[];
  const result: unknown = await ctx.db.raw(sql, bindings as Knex.RawBinding[]);
  if (Array.isArray(result)) return result as T[];
  return (result as { rows: T[] }).rows;
}

/** Affected row count of a `knex.raw` INSERT/UPDATE/DELETE on either dialect. */
export async function execute(ctx: StoreContext, sql: string, bindings: readonly unknown[]): Promise<number> {
  if (ctx.direct !== undefined) return Number((await ctx.direct.run(sql, bindings)).rowCount ?? 0);
  const result = (await ctx.db.raw(sql, bindings as Knex.RawBinding[])) as { rowCount?: number | null; changes?: number };
  return Number(result.rowCount ?? result.changes ?? 0);
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
