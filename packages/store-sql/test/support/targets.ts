/**
 * The databases every store test runs against: SQLite on a temp file and in memory (always), and
 * Postgres when TEST_DATABASE_URL is set. Each Postgres run works in its own freshly created schema
 * (cos_test_<random>), dropped at the end, so parallel runs never collide. Under CI=true a missing
 * TEST_DATABASE_URL fails instead of skipping.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSqlStore, type SqlDialect, type SqlStore, type SqlStoreConfig } from '@cos/store-sql';
import knexFactory, { type Knex } from 'knex';

export const TABLES = ['organisations', 'members', 'api_keys', 'audit_entries', 'webhook_endpoints', 'webhook_outbox', 'api_key_exposures', 'instance_registry', 'organisation_key_policies', 'idempotency_keys', 'key_usage'] as const;

export interface Target {
  readonly name: string;
  readonly dialect: SqlDialect;
  /** A fresh, empty, migrated store. The caller closes it. */
  open(options?: Partial<SqlStoreConfig>): Promise<SqlStore>;
  /** A fresh store over a database (or schema) that has never been migrated. */
  openUnmigrated(options?: Partial<SqlStoreConfig>): Promise<SqlStore>;
  dispose(): Promise<void>;
}

function sqliteFileTarget(): Target {
  let dir: string | null = null;
  let n = 0;
  const next = (options?: Partial<SqlStoreConfig>): SqlStore => {
    dir ??= mkdtempSync(join(tmpdir(), 'cos-store-sql-'));
    n += 1;
    return createSqlStore({ databaseUrl: `sqlite:${join(dir, `db-${n}`, 'cos.sqlite')}`, ...options });
  };
  return {
    name: 'SQLite (file)',
    dialect: 'sqlite',
    async open(options) {
      const store = next(options);
      await store.migrate();
      return store;
    },
    async openUnmigrated(options) {
      return next(options);
    },
    async dispose() {
      if (dir !== null) rmSync(dir, { recursive: true, force: true });
    },
  };
}

function sqliteMemoryTarget(): Target {
  return {
    name: 'SQLite (:memory:)',
    dialect: 'sqlite',
    async open(options) {
      const store = createSqlStore({ databaseUrl: 'sqlite::memory:', ...options });
      await store.migrate();
      return store;
    },
    async openUnmigrated(options) {
      return createSqlStore({ databaseUrl: 'sqlite::memory:', ...options });
    },
    async dispose() {},
  };
}

export function testSchemaName(): string {
  return `cos_test_${randomBytes(6).toString('hex')}`;
}

function postgresTarget(url: string): Target {
  let admin: Knex | null = null;
  const schemas: string[] = [];
  let shared: string | null = null;
  const adminKnex = (): Knex => (admin ??= knexFactory({ client: 'pg', connection: url, pool: { min: 0, max: 2 } }));
  const newSchema = async (): Promise<string> => {
    const schema = testSchemaName();
    await adminKnex().raw('CREATE SCHEMA ??', [schema]);
    schemas.push(schema);
    return schema;
  };
  return {
    name: 'Postgres',
    dialect: 'postgres',
    async open(options) {
      if (shared === null) {
        const schema = await newSchema();
        const migrator = createSqlStore({ databaseUrl: url, schema });
        try {
          await migrator.migrate();
        } finally {
          await migrator.close();
        }
        shared = schema;
      }
      // DELETE rather than TRUNCATE: on tables this small it is far cheaper (no new relfilenodes).
      for (const t of ['key_usage', 'idempotency_keys', 'organisation_key_policies', 'api_key_exposures', 'webhook_outbox', 'webhook_endpoints', 'audit_entries', 'api_keys', 'members', 'organisations']) await adminKnex().raw(`DELETE FROM "${shared}".${t}`);
      return createSqlStore({ databaseUrl: url, schema: shared, ...options });
    },
    async openUnmigrated(options) {
      return createSqlStore({ databaseUrl: url, schema: await newSchema(), ...options });
    },
    async dispose() {
      if (admin === null) return;
      for (const schema of schemas) await admin.raw('DROP SCHEMA IF EXISTS ?? CASCADE', [schema]);
      await admin.destroy();
      admin = null;
    },
  };
}

/**
 * Registers `body` once per database, inside a describe named after it. The target is created when
 * the describe runs and disposed after it.
 */
export function forEachTarget(title: string, body: (target: Target) => void): void {
  const url = process.env.TEST_DATABASE_URL;
  const factories: Array<[string, (() => Target) | null]> = [
    ['SQLite (file)', sqliteFileTarget],
    ['SQLite (:memory:)', sqliteMemoryTarget],
    ['Postgres', url ? () => postgresTarget(url) : null],
  ];
  for (const [name, factory] of factories) {
    if (factory === null) {
      postgresMissing(`${title} on ${name}`);
      continue;
    }
    describe(`${title} on ${name}`, function () {
      const target = factory();
      after(() => target.dispose());
      body(target);
    });
  }
}

/**
 * A Postgres suite without TEST_DATABASE_URL: under CI=true a failing test (the suites must run in
 * CI); elsewhere one visible pending test (mocha's `it` without a body), so the gap shows in the count.
 */
function postgresMissing(title: string): void {
  describe(title, () => {
    if (process.env.CI === 'true') {
      it('TEST_DATABASE_URL is set (required under CI=true)', () => {
        throw new Error('TEST_DATABASE_URL is not set but CI=true: the Postgres suites must run in CI');
      });
    } else {
      it('needs TEST_DATABASE_URL (skipped outside CI)');
    }
  });
}

/** Only the Postgres target (same CI rule), for Postgres-specific tests. */
export function withPostgres(title: string, body: (url: string, target: Target) => void): void {
  const url = process.env.TEST_DATABASE_URL;
  if (!url) {
    postgresMissing(title);
    return;
  }
  describe(title, function () {
    const target = postgresTarget(url);
    after(() => target.dispose());
    body(url, target);
  });
}
