import { TOKENS, type HealthProbe, type Logger, type Stores, type UnitOfWork } from '@cos/core';
import { ContainerModule } from 'inversify';
import { createSqlStore, type SqlStore, type SqlStoreConfig } from './sql-store.js';

/** Token of the SqlStore itself (for migrate(), pendingMigrations() and close()). */
export const SQL_STORE: symbol = Symbol.for('cos.SqlStore');

/**
 * Binds SQL_STORE (a singleton, closed on container unbind) and the core's TOKENS.Stores,
 * TOKENS.UnitOfWork and TOKENS.HealthProbe. Uses TOKENS.Logger when the container has one and the
 * config names none. No decorator metadata needed.
 */
export function sqlStoreModule(config: SqlStoreConfig): ContainerModule {
  return new ContainerModule(({ bind }) => {
    bind<SqlStore>(SQL_STORE)
      .toDynamicValue((context) =>
        createSqlStore({ ...config, logger: config.logger ?? context.get<Logger>(TOKENS.Logger, { optional: true }) }),
      )
      .inSingletonScope()
      .onDeactivation((store) => store.close());
    bind<Stores>(TOKENS.Stores)
      .toResolvedValue((store: SqlStore) => store.stores, [SQL_STORE])
      .inSingletonScope();
    bind<UnitOfWork>(TOKENS.UnitOfWork)
      .toResolvedValue((store: SqlStore) => store.unitOfWork, [SQL_STORE])
      .inSingletonScope();
    bind<HealthProbe>(TOKENS.HealthProbe)
      .toResolvedValue((store: SqlStore) => store.health, [SQL_STORE])
      .inSingletonScope();
  });
}
