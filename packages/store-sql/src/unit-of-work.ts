import type { OuterStores, Stores, UnitOfWork } from '@cos/core';
import type { SqlSession } from './context.js';
import type { SqlDialect } from './database-url.js';
import type { ErrorTranslator } from './errors.js';
import { createStores } from './stores/index.js';

/** Runs `work` in one transaction on one connection: committed when it resolves, rolled back when it throws. */
export type Transact = <T>(work: (session: SqlSession) => Promise<T>) => Promise<T>;

/**
 * One transaction per `run` or `changeCredentials` (C-40): every write made through the given stores commits together,
 * or none does when `work` throws. Use only the stores handed to `work` inside it: on SQLite the store
 * has a single connection, so a query through the outer stores (or SqlStore.knex) would wait for this
 * transaction.
 * On Postgres (createSqlStore) the whole run, pool wait included, shares one `statementTimeoutMs`
 * deadline; a statement that outlives it closes its connection, so the transaction is never
 * committed and no ROLLBACK is waited for (postgres/database.ts, C-17).
 */
export class SqlUnitOfWork implements UnitOfWork {
  constructor(
    private readonly transact: Transact,
    private readonly dialect: SqlDialect,
    private readonly errors: ErrorTranslator,
  ) {}

  run<T>(work: (stores: OuterStores) => Promise<T>): Promise<T> {
    return this.transaction(NO_ORGANISATIONS, work);
  }

  changeCredentials<T>(organisationIds: readonly string[], work: (stores: Stores) => Promise<T>): Promise<T> {
    return this.transaction(new Set(organisationIds), work);
  }

  /** The stores refuse a credential-affecting write of any organisation outside `credentialChanges`. */
  private async transaction<T>(credentialChanges: ReadonlySet<string>, work: (stores: Stores) => Promise<T>): Promise<T> {
    try {
      return await this.transact((session) =>
        work(createStores({ session, dialect: this.dialect, inTransaction: true, credentialChanges, errors: this.errors })),
      );
    } catch (e) {
      throw this.errors.translate(e);
    }
  }
}

const NO_ORGANISATIONS: ReadonlySet<string> = new Set();
