/**
 * A host's knex (createSqlStoreFromKnex): statements through knex's public `knex.raw`, units of work
 * through `knex.transaction`. (SQLite from a URL runs on sqlite/database.ts, Postgres from a URL on
 * postgres/database.ts.)
 */
import type { Knex } from 'knex';
import type { SqlResult, SqlSession, StatementListeners } from './context.js';

/** `knex.raw`'s answer on either dialect: SQLite gives rows (a SELECT, or RETURNING) or `{changes}`, Postgres `{rows, rowCount}`. */
function resultOf(raw: unknown): SqlResult {
  if (Array.isArray(raw)) return { rows: raw as Record<string, unknown>[], rowCount: raw.length };
  const result = (raw ?? {}) as { rows?: Record<string, unknown>[]; rowCount?: number | null; changes?: number };
  return { rows: result.rows ?? [], rowCount: Number(result.rowCount ?? result.changes ?? 0) };
}

function sessionOf(db: Knex, listeners: StatementListeners): SqlSession {
  return {
    async run(sql, bindings) {
      listeners.emit(sql, bindings);
      return resultOf(await db.raw(sql, bindings as Knex.RawBinding[]));
    },
  };
}

export class KnexDatabase {
  readonly session: SqlSession;

  constructor(
    readonly knex: Knex,
    private readonly listeners: StatementListeners,
  ) {
    this.session = sessionOf(knex, listeners);
  }

  /** One knex transaction: committed when `work` resolves, rolled back when it throws. */
  transaction<T>(work: (session: SqlSession) => Promise<T>): Promise<T> {
    return this.knex.transaction((trx) => work(sessionOf(trx, this.listeners)));
  }

  /** Ad-hoc SQL (fixtures, diagnostics). */
  adHoc(sql: string, bindings: readonly unknown[]): Promise<SqlResult> {
    return this.knex.raw(sql, bindings as Knex.RawBinding[]).then(resultOf);
  }
}
