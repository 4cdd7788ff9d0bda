/**
 * Schema migrations as code: a knex migration source object (no files found by glob), so the
 * same migrations run from dist/, from tsx and when bundled. Forward-only: there is no `down`.
 *
 * One file per migration beside this one, named as its row in the bookkeeping table
 * (`0001_initial.ts` is recorded as `0001_initial`); MIGRATIONS below runs them in its order. A new
 * migration is a new file and one entry at the end of that list (and its import above it).
 */
import type { Knex } from 'knex';
import type { SqlDialect } from '../database-url.js';
import { initial } from './0001_initial.js';
import { leakedKeys } from './0002_leaked_keys.js';
import { keyLifecycle } from './0003_key_lifecycle.js';
import { operatorAudit } from './0004_operator_audit.js';
import { instanceRegistry } from './0005_instance_registry.js';
import { deliveryPerEndpoint } from './0006_delivery_per_endpoint.js';
import { webhookAtRest } from './0007_webhook_at_rest.js';
import { leastPrivilege } from './0008_least_privilege.js';
import { auditChain } from './0009_audit_chain.js';
import { idempotencyKeys } from './0010_idempotency_keys.js';
import { webhookOverlap } from './0011_webhook_overlap.js';
import { rareKindIndex } from './0012_audit_rare_kind_index.js';
import { redisIdentity } from './0013_redis_identity.js';
import { auditSeqChecks } from './0014_audit_seq_checks.js';
import { organisationRateLimit } from './0015_organisation_rate_limit.js';
import { keyUsage } from './0016_key_usage.js';
import { keyMetadataCidrs } from './0017_key_metadata_cidrs.js';
import { expiryNotices } from './0018_expiry_notices.js';
import { keyRateLimit } from './0019_key_rate_limit.js';
import type { SqlMigration } from './migration.js';

export type { SqlMigration } from './migration.js';

export const MIGRATIONS_TABLE = 'cos_migrations';

/** Every migration, oldest first. Append only; never edit or reorder a released entry. */
export const MIGRATIONS: readonly SqlMigration[] = Object.freeze([
  initial,
  leakedKeys,
  keyLifecycle,
  operatorAudit,
  instanceRegistry,
  deliveryPerEndpoint,
  webhookAtRest,
  leastPrivilege,
  auditChain,
  idempotencyKeys,
  webhookOverlap,
  rareKindIndex,
  redisIdentity,
  auditSeqChecks,
  organisationRateLimit,
  keyUsage,
  keyMetadataCidrs,
  expiryNotices,
  keyRateLimit,
]);

export function migrationSource(dialect: SqlDialect): Knex.MigrationSource<SqlMigration> {
  return {
    getMigrations: () => Promise.resolve([...MIGRATIONS]),
    getMigrationName: (migration) => migration.name,
    getMigration: (migration) =>
      Promise.resolve({
        async up(db: Knex): Promise<void> {
          await migration.before?.(db, dialect);
          for (const sql of migration.statements(dialect)) await db.raw(sql);
          await migration.after?.(db, dialect);
        },
        down(): Promise<void> {
          return Promise.reject(new Error(`migration ${migration.name} is forward-only`));
        },
      }),
  };
}

export function migratorConfig(dialect: SqlDialect): Knex.MigratorConfig {
  return {
    migrationSource: migrationSource(dialect),
    // Our own bookkeeping table: embedded in a host's knex, the host's knex_migrations stays untouched.
    tableName: MIGRATIONS_TABLE,
  };
}

const TABLE_EXISTS: Readonly<Record<SqlDialect, string>> = {
  postgres: 'SELECT count(*) AS n FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = ?',
  sqlite: "SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name = ?",
};

/**
 * Names of migrations not yet applied, without creating the bookkeeping table (read-only). Two
 * statements through the store's own connections (so under its deadline), with the checks knex's
 * migrator makes (`hasTable` in the current schema, then the recorded names).
 */
export async function pendingMigrationNames(
  dialect: SqlDialect,
  query: (sql: string, bindings: readonly unknown[]) => Promise<Array<Record<string, unknown>>>,
): Promise<string[]> {
  const all = MIGRATIONS.map((m) => m.name);
  const [exists] = await query(TABLE_EXISTS[dialect], [MIGRATIONS_TABLE]);
  if (Number(exists?.n ?? 0) === 0) return all;
  const done = new Set((await query(`SELECT name FROM ${MIGRATIONS_TABLE}`, [])).map((r) => String(r.name)));
  return all.filter((name) => !done.has(name));
}
