/**
 * What one schema migration is, and the id column type most of them use.
 *
 * One schema on both dialects:
 *  - ids: text (UUIDs as produced by the core). On Postgres with COLLATE "C" so that ordering is
 *    plain byte order, the same as SQLite's BINARY and JavaScript's string comparison (C-7 ties).
 *  - timestamps: bigint epoch milliseconds (UTC by definition). Exact millisecond round trip, the
 *    same instant on both dialects, integer comparison for keyset pagination (C-6, C-7) and no
 *    driver-side time-zone parsing. Column names keep the `_at` suffix; the unit is documented here.
 *  - booleans: `boolean` (Postgres boolean; SQLite stores 0/1 and the store maps back to booleans).
 */
import type { Knex } from 'knex';
import type { SqlDialect } from '../database-url.js';

export interface SqlMigration {
  readonly name: string;
  /**
   * Set only on a migration that is not expand-only (it drops or renames what the release before it
   * still reads): why. Operators apply such a migration to a database in use only deliberately, once
   * no instance of the previous release runs (`cos-admin migrate --allow-breaking`).
   */
  readonly breaking?: string;
  /** DDL statements, one per entry (better-sqlite3 prepares one statement at a time). */
  statements(dialect: SqlDialect): readonly string[];
  /** Checks run before `statements`, in the same transaction: a throw leaves the database as it was. */
  before?(db: Knex, dialect: SqlDialect): Promise<void>;
  /** Work that SQL alone cannot do, run after `statements` in the same transaction. */
  after?(db: Knex, dialect: SqlDialect): Promise<void>;
}

/** An id column: text, in byte order on both dialects. */
export function idType(dialect: SqlDialect): string {
  return dialect === 'postgres' ? 'text COLLATE "C"' : 'text';
}
