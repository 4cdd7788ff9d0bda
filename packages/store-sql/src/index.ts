/**
 * @cos/store-sql: the core's store ports on SQLite (embedded default) and Postgres (production),
 * one schema and one contract.
 */
export { parseDatabaseUrl, redactDatabaseUrl, type ParsedDatabaseUrl, type SqlDialect } from './database-url.js';
export {
  createSqlStore,
  createSqlStoreFromKnex,
  DEFAULT_STATEMENT_TIMEOUT_MS,
  type SqlStore,
  type SqlStoreConfig,
  type SqlStatement,
  type SqlStoreFromKnexOptions,
} from './sql-store.js';
export {
  checkCopyEnds,
  copyDatabase,
  COPIED_TABLES,
  CopyRefused,
  SKIPPED_TABLES,
  tableCounts,
  tablesOf,
  type CopiedTable,
  type CopyOptions,
  type CopyResult,
  type TableProgress,
} from './copy.js';
export { MIGRATIONS, MIGRATIONS_TABLE, migrationSource as sqlMigrationSource, type SqlMigration } from './migrations/index.js';
export { SqlInstanceRegistry, type RegistryDatabase } from './instance-registry.js';
