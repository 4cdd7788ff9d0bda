/** createSqlStoreFromKnex: a store over a host service's own knex (embedding). */
import { createSqlStoreFromKnex } from '@cos/store-sql';
import { expect } from 'chai';
import knexFactory, { type Knex } from 'knex';
import { issuedKey, organisation } from './support/fixtures.js';
import { testSchemaName, withPostgres } from './support/targets.js';

describe('createSqlStoreFromKnex', () => {
  it("works over a host's SQLite knex, keeps the host's migrations table apart, and leaves the pool open on close()", async () => {
    const host = knexFactory({
      client: 'better-sqlite3',
      connection: { filename: ':memory:' },
      useNullAsDefault: true,
      pool: {
        min: 1,
        max: 1,
        afterCreate: (conn: { pragma(s: string): unknown }, done: (e: Error | null, c: unknown) => void) => {
          conn.pragma('foreign_keys = ON');
          done(null, conn);
        },
      },
    });
    try {
      await host.schema.createTable('knex_migrations', (t) => {
        t.increments('id');
        t.string('name');
      });
      await host('knex_migrations').insert({ name: '20200101_host_own_migration.js' });
      const store = createSqlStoreFromKnex(host);
      expect(store.dialect).to.equal('sqlite');
      expect(store.knex).to.equal(host);
      expect(await store.migrate()).to.deep.equal(['0001_initial', '0002_leaked_keys', '0003_key_lifecycle', '0004_operator_audit', '0005_instance_registry', '0006_delivery_per_endpoint', '0007_webhook_at_rest', '0008_least_privilege', '0009_audit_chain', '0010_idempotency_keys', '0011_webhook_overlap', '0012_audit_rare_kind_index', '0013_redis_identity', '0014_audit_seq_checks', '0015_organisation_rate_limit', '0016_key_usage', '0017_key_metadata_cidrs', '0018_expiry_notices', '0019_key_rate_limit']);
      const o = organisation();
      await store.stores.organisations.create(o);
      const { key } = issuedKey(o.id);
      await store.unitOfWork.run((tx) => tx.apiKeys.insert(key));
      expect((await store.stores.apiKeys.findCredential(key.digest))?.organisation.id).to.equal(o.id);
      await store.close();
      expect(await host('knex_migrations').pluck('name'), "the host's bookkeeping is untouched").to.deep.equal([
        '20200101_host_own_migration.js',
      ]);
      expect((await host('organisations').count({ n: '*' }))[0]).to.deep.equal({ n: 1 });
    } finally {
      await host.destroy();
    }
  });

  it('destroyOnClose: true closes the host knex', async () => {
    const host = knexFactory({ client: 'better-sqlite3', connection: { filename: ':memory:' }, useNullAsDefault: true });
    const store = createSqlStoreFromKnex(host, { destroyOnClose: true });
    await store.health.ping();
    await store.close();
    let error: unknown;
    try {
      await host.raw('SELECT 1');
    } catch (e) {
      error = e;
    }
    expect(error).to.be.instanceOf(Error);
  });

  it('refuses a knex client that is neither SQLite nor Postgres, saying which', () => {
    const fake = { client: { dialect: 'mssql', config: { client: 'mssql' } } } as unknown as Knex;
    expect(() => createSqlStoreFromKnex(fake)).to.throw(/SQLite and Postgres.*"mssql"/);
  });
});

withPostgres("createSqlStoreFromKnex over a host's Postgres knex", (url) => {
  it('detects Postgres, migrates into the host search path and answers the store contract basics', async () => {
    const schema = testSchemaName();
    const admin = knexFactory({ client: 'pg', connection: url, pool: { min: 0, max: 1 } });
    await admin.raw('CREATE SCHEMA ??', [schema]);
    const host = knexFactory({ client: 'postgresql', connection: url, searchPath: [schema], pool: { min: 0, max: 4 } });
    try {
      const store = createSqlStoreFromKnex(host);
      expect(store.dialect).to.equal('postgres');
      expect(await store.pendingMigrations()).to.deep.equal(['0001_initial', '0002_leaked_keys', '0003_key_lifecycle', '0004_operator_audit', '0005_instance_registry', '0006_delivery_per_endpoint', '0007_webhook_at_rest', '0008_least_privilege', '0009_audit_chain', '0010_idempotency_keys', '0011_webhook_overlap', '0012_audit_rare_kind_index', '0013_redis_identity', '0014_audit_seq_checks', '0015_organisation_rate_limit', '0016_key_usage', '0017_key_metadata_cidrs', '0018_expiry_notices', '0019_key_rate_limit']);
      expect(await store.migrate()).to.deep.equal(['0001_initial', '0002_leaked_keys', '0003_key_lifecycle', '0004_operator_audit', '0005_instance_registry', '0006_delivery_per_endpoint', '0007_webhook_at_rest', '0008_least_privilege', '0009_audit_chain', '0010_idempotency_keys', '0011_webhook_overlap', '0012_audit_rare_kind_index', '0013_redis_identity', '0014_audit_seq_checks', '0015_organisation_rate_limit', '0016_key_usage', '0017_key_metadata_cidrs', '0018_expiry_notices', '0019_key_rate_limit']);
      const o = organisation({ isSystem: true });
      await store.stores.organisations.create(o);
      expect(await store.stores.organisations.findFirstSystem()).to.deep.equal(o);
      await store.close();
      expect((await host.raw('SELECT 1 AS one')).rows).to.deep.equal([{ one: 1 }]);
    } finally {
      await host.destroy();
      await admin.raw('DROP SCHEMA IF EXISTS ?? CASCADE', [schema]);
      await admin.destroy();
    }
  });
});
