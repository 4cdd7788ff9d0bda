/** SQLite specifics: file settings, lazy connect, directory creation, ':memory:' that never goes away. */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSqlStore, type SqlStore } from '@cos/store-sql';
import { expect } from 'chai';
import { organisation } from './support/fixtures.js';

async function pragma(store: SqlStore, name: string): Promise<unknown> {
  const rows = (await store.knex.raw(`PRAGMA ${name}`)) as Array<Record<string, unknown>>;
  return Object.values(rows[0] ?? {})[0];
}

describe('SQLite store', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'cos-store-sql-sqlite-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('connects lazily and creates the missing parent directories of the file on first use', async () => {
    const file = join(dir, 'a', 'b', 'c', 'cos.sqlite');
    const store = createSqlStore({ databaseUrl: `sqlite:${file}` });
    try {
      expect(existsSync(join(dir, 'a')), 'nothing created before the first query').to.equal(false);
      expect(await store.pendingMigrations()).to.deep.equal(['0001_initial', '0002_leaked_keys', '0003_key_lifecycle', '0004_operator_audit', '0005_instance_registry', '0006_delivery_per_endpoint', '0007_webhook_at_rest', '0008_least_privilege', '0009_audit_chain', '0010_idempotency_keys', '0011_webhook_overlap', '0012_audit_rare_kind_index', '0013_redis_identity', '0014_audit_seq_checks', '0015_organisation_rate_limit', '0016_key_usage', '0017_key_metadata_cidrs', '0018_expiry_notices', '0019_key_rate_limit']);
      expect(existsSync(file)).to.equal(true);
    } finally {
      await store.close();
    }
  });

  it('runs the file in WAL mode with foreign keys on and a busy timeout equal to the statement timeout', async () => {
    const store = createSqlStore({ databaseUrl: `sqlite:${join(dir, 'settings.sqlite')}`, statementTimeoutMs: 1234 });
    try {
      expect(await pragma(store, 'journal_mode')).to.equal('wal');
      expect(await pragma(store, 'foreign_keys')).to.equal(1);
      expect(await pragma(store, 'busy_timeout')).to.equal(1234);
    } finally {
      await store.close();
    }
  });

  it('C-17: after units of work (which begin with busy_timeout 0), single statements and knex run with the statement timeout as busy timeout again', async () => {
    const store = createSqlStore({ databaseUrl: `sqlite:${join(dir, 'busy-after-work.sqlite')}`, statementTimeoutMs: 1234 });
    try {
      await store.migrate();
      const o = organisation();
      await store.unitOfWork.run((stores) => stores.organisations.create(o));
      await store.unitOfWork.run(async (stores) => {
        expect(await stores.organisations.findById(o.id)).to.not.equal(null);
      });
      const viaStore = await store.query<Record<string, unknown>>('PRAGMA busy_timeout');
      expect(Object.values(viaStore[0] ?? {})[0], 'a single statement').to.equal(1234);
      await store.unitOfWork.run((stores) => stores.organisations.findById(o.id));
      expect(await pragma(store, 'busy_timeout'), 'knex').to.equal(1234);
    } finally {
      await store.close();
    }
  });

  it('the default statement timeout (C-17) is 2000 ms', async () => {
    const store = createSqlStore({ databaseUrl: 'sqlite::memory:' });
    try {
      expect(await pragma(store, 'busy_timeout')).to.equal(2000);
      expect(await pragma(store, 'foreign_keys')).to.equal(1);
    } finally {
      await store.close();
    }
  });

  it('data in a file survives closing and reopening the store', async () => {
    const url = `sqlite:${join(dir, 'reopen.sqlite')}`;
    const o = organisation();
    const first = createSqlStore({ databaseUrl: url });
    await first.migrate();
    await first.stores.organisations.create(o);
    await first.close();
    const second = createSqlStore({ databaseUrl: url });
    try {
      expect(await second.pendingMigrations()).to.deep.equal([]);
      expect((await second.stores.organisations.findById(o.id))?.slug).to.equal(o.slug);
    } finally {
      await second.close();
    }
  });

  it("':memory:' keeps its database while the pooled connection idles past the pool's reap interval", async function () {
    this.timeout(10_000);
    const store = createSqlStore({ databaseUrl: 'sqlite::memory:' });
    try {
      await store.migrate();
      const o = organisation();
      await store.stores.organisations.create(o);
      // One connection that is never reaped: tarn keeps `min` connections whatever their idle time.
      const pool = (store.knex.client as { pool: { min: number; max: number; numUsed(): number; numFree(): number } }).pool;
      expect([pool.min, pool.max]).to.deep.equal([1, 1]);
      await new Promise((resolve) => setTimeout(resolve, 1500)); // tarn reaps idle connections every 1 s
      expect(pool.numUsed() + pool.numFree(), 'the connection is still there').to.equal(1);
      expect((await store.stores.organisations.findById(o.id))?.id).to.equal(o.id);
      expect(await store.pendingMigrations()).to.deep.equal([]);
    } finally {
      await store.close();
    }
  });

  it('cached prepared statements follow schema changes (added column, dropped and recreated table)', async () => {
    const store = createSqlStore({ databaseUrl: 'sqlite::memory:' });
    try {
      await store.knex.raw('CREATE TABLE t (a integer)');
      await store.knex.raw('INSERT INTO t VALUES (1)');
      expect(await store.knex.raw('SELECT * FROM t')).to.deep.equal([{ a: 1 }]);
      await store.knex.raw('ALTER TABLE t ADD COLUMN b integer DEFAULT 7');
      expect(await store.knex.raw('SELECT * FROM t')).to.deep.equal([{ a: 1, b: 7 }]);
      await store.knex.raw('DROP TABLE t');
      await store.knex.raw('CREATE TABLE t (c text)');
      await store.knex.raw("INSERT INTO t VALUES ('x')");
      expect(await store.knex.raw('SELECT * FROM t')).to.deep.equal([{ c: 'x' }]);
    } finally {
      await store.close();
    }
  });

  it("two ':memory:' stores are separate databases", async () => {
    const a = createSqlStore({ databaseUrl: 'sqlite::memory:' });
    const b = createSqlStore({ databaseUrl: 'sqlite::memory:' });
    try {
      await a.migrate();
      expect(await b.pendingMigrations()).to.deep.equal(['0001_initial', '0002_leaked_keys', '0003_key_lifecycle', '0004_operator_audit', '0005_instance_registry', '0006_delivery_per_endpoint', '0007_webhook_at_rest', '0008_least_privilege', '0009_audit_chain', '0010_idempotency_keys', '0011_webhook_overlap', '0012_audit_rare_kind_index', '0013_redis_identity', '0014_audit_seq_checks', '0015_organisation_rate_limit', '0016_key_usage', '0017_key_metadata_cidrs', '0018_expiry_notices', '0019_key_rate_limit']);
    } finally {
      await a.close();
      await b.close();
    }
  });
});
