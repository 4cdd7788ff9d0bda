import { declaredOrganisations, type Stores, type UnitOfWork, type WorkDeclaration } from '@cos/core';
import type { SqlSession } from './context.js';
import type { SqlDialect } from './database-url.js';
import type { ErrorTranslator } from './errors.js';
import { createStores } from './stores/index.js';

/** Runs `work` in one transaction on one connection: committed when it resolves, rolled back when it throws. */
export type Transact = <T>(work: (session: SqlSession) => Promise<T>) => Promise<T>;

/**
 * One transaction per `run` (C-40): every write made through the given stores commits together,
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

  async run<T>(work: (stores: Stores) => Promise<T>, declaration?: WorkDeclaration): Promise<T> {
    const credentialChanges = declaredOrganisations(declaration);
    try {
      return await this.transact((session) =>
        work(createStores({ session, dialect: this.dialect, inTransaction: true, credentialChanges, errors: this.errors })),
      );
    } catch (e) {
      throw this.errors.translate(e);
    }
  }
}
